"""`--type T` on saga costs, review accept and init, through the real CLI: each acts on T's
keys only, and every command that takes --type describes it alike."""

from __future__ import annotations

import argparse
from typing import Any

import pytest

from saga.cli.main import build_parser
from saga.cli.saga_types import OWN
from saga.state.keys import Keys
from saga.state.types import TypeInfo, register_type, type_info
from tests.cli.inspect_support import STEPS, cli, cli_json, machine
from tests.cli.test_costs import spend
from tests.cli.test_review import flagged_and_plain

pytestmark = pytest.mark.anyio


async def orders(redis: Any, keys: Keys) -> Keys:
    """A second saga type, `orders`, with the same step names, registered."""
    info = TypeInfo(name="orders", steps=tuple(STEPS), loads_pages=("parser",))
    await register_type(redis, keys, info)
    return keys.of_type("orders")


async def test_costs_of_one_type(redis: Any, keys: Keys, redis_url: str) -> None:
    """--type orders sums orders' daily totals; the default type has none of them."""
    await spend(redis, await orders(redis, keys))
    doc = cli_json(keys, redis_url, "costs", "--type", "orders")
    assert doc["total_usd"] == pytest.approx(0.57) and doc["total_attempts"] == 4
    assert sorted(doc["by_user"]) == ["u-1", "u-2"]
    res = cli(keys, redis_url, "costs")
    assert res.returncode == 0 and res.stdout.startswith("no LLM costs recorded"), res.stdout


async def test_review_accept_of_one_type(redis: Any, keys: Keys, redis_url: str) -> None:
    """review accept --type orders clears the orders saga's flag; without --type the same
    record id is another type's, which has no such saga (exit 4)."""
    ok = await orders(redis, keys)
    await flagged_and_plain(await machine(redis, ok))
    missing = cli(keys, redis_url, "review", "accept", "mr-flag")
    assert missing.returncode == 4, missing.stderr
    doc = cli_json(keys, redis_url, "review", "accept", "mr-flag", "--type", "orders")
    assert doc == {"record_id": "mr-flag", "accepted": True, "flags_cleared": 1, "moved_on_to": ""}
    listed = cli_json(keys, redis_url, "list", "--type", "orders", "--review")["sagas"]
    assert listed == []


async def test_init_of_one_type(redis: Any, keys: Keys, redis_url: str) -> None:
    """init --type orders makes orders' groups from its registered steps, once; plain init
    makes the own type's and registers it (so `saga top` lists it before any worker)."""
    ok = await orders(redis, keys)
    doc = cli_json(keys, redis_url, "init", "--type", "orders")
    assert (doc["type"], doc["steps"]) == ("orders", list(STEPS))
    assert doc["groups_created"] == len(STEPS) * keys.partitions
    assert await redis.exists(ok.ready(0, "router")) and not await redis.exists(
        keys.ready(0, "router")
    )
    assert cli_json(keys, redis_url, "init", "--type", "orders")["groups_created"] == 0

    assert await type_info(redis, keys, "documents") is None
    doc = cli_json(keys, redis_url, "init")
    assert (doc["type"], doc["groups_created"]) == ("documents", 3 * keys.partitions)
    found = await type_info(redis, keys, "documents")
    assert found is not None and found.steps == ("router", "parser", "grouper")


def test_every_type_option_has_the_same_help() -> None:
    """The commands that act on one saga type take --type with the same help text."""

    def commands(parser: argparse.ArgumentParser, path: str = "") -> dict[str, Any]:
        found = {path: parser} if path else {}
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    found |= commands(sub, f"{path} {name}".strip())
        return found

    helps = {
        path: action.help
        for path, p in commands(build_parser()).items()
        for action in p._actions
        if "--type" in action.option_strings
    }
    for path in ("costs", "review accept", "init", "list", "show", "start", "retry", "cancel"):
        assert helps.get(path) == f"saga type (default: {OWN})", path
    assert helps["top"] == "saga type (default: every registered type)"
