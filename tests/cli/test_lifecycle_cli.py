"""The data-lifecycle commands in a subprocess: ``saga retention show`` and ``saga purge``
(a dry run without --yes, exit 1 naming a record it refused, exit 2 for bad usage),
their --json validated against the shipped schemas."""

from __future__ import annotations

import json
from typing import Any

import pytest

from saga.state.keys import Keys
from tests.cli.inspect_support import cli, commit, machine, run_to_dead, start
from tests.cli.test_json_shapes import validate

pytestmark = pytest.mark.anyio


async def test_retention_show_lists_every_state_and_what_is_due(
    redis: Any, keys: Keys, redis_url: str
) -> None:
    """Each terminal state's retention from SAGA_RETENTION_DAYS, and the dead-lettered
    saga scheduled for deletion."""
    sm = await machine(redis, keys)
    await run_to_dead(sm, "r-dead", "router")
    env = {"SAGA_RETENTION_DAYS": "failed=90,needs_review=off"}
    res = cli(keys, redis_url, "retention", "show", "--json", env=env)
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    validate("retention", doc)
    days = {r["state"]: r["days"] for r in doc["retention"]}
    assert (days["failed"], days["needs_review"], days["completed"]) == (90, None, 7)
    assert (doc["scheduled"], doc["due"]) == (1, 0)
    plain = cli(keys, redis_url, "retention", "show", env=env)
    assert "kept until purged" in plain.stdout and "1 ended saga(s)" in plain.stdout


async def test_purge_is_a_dry_run_without_yes(redis: Any, keys: Keys, redis_url: str) -> None:
    """Without --yes the record stays and the output says so; with it, it is gone."""
    sm = await machine(redis, keys)
    await run_to_dead(sm, "r-gone", "parser")
    res = cli(keys, redis_url, "purge", "r-gone")
    assert res.returncode == 0, res.stderr
    assert "would delete" in res.stdout and "dry run" in res.stdout
    assert await redis.exists(keys.saga("r-gone")) == 1
    res = cli(keys, redis_url, "purge", "r-gone", "--yes", "--json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    validate("purge", doc)
    assert doc["applied"] and doc["records"][0]["state"] == "failed"
    assert await redis.exists(keys.saga("r-gone"), keys.history("r-gone")) == 0


async def test_purge_refuses_an_active_saga_and_bad_usage(
    redis: Any, keys: Keys, redis_url: str
) -> None:
    """A running saga is refused (exit 1, one sentence saying to cancel it); naming both a
    record and a user, or neither, is a usage error (exit 2)."""
    sm = await machine(redis, keys)
    await start(sm, "r-busy", "u-9")
    await commit(sm, "router")
    res = cli(keys, redis_url, "purge", "--user", "u-9", "--yes")
    assert res.returncode == 1
    assert "r-busy" in res.stderr and "cancel it first" in res.stderr
    assert res.stderr.count("\n") == 1
    assert await redis.exists(keys.saga("r-busy")) == 1
    for argv in (("purge",), ("purge", "r-busy", "--user", "u-9")):
        assert cli(keys, redis_url, *argv).returncode == 2
