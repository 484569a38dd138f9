"""saga costs: daily cost totals summed per user and step over days and partitions."""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

import pytest

from saga.cli.cmd_costs import days_since
from saga.cli.common import CliError
from saga.state.keys import Keys
from saga.state.model import FailAction
from tests.cli.inspect_support import cli, cli_json, commit, fail, machine, start

pytestmark = pytest.mark.anyio


async def spend(redis: Any, keys: Keys) -> None:
    """u-1: router $0.01 + $0.02 (a retried attempt) and parser $0.5; u-2: router $0.04;
    attempts without a cost are not counted."""
    sm = await machine(redis, keys)
    await start(sm, "mr-1", "u-1")
    await fail(sm, "router", FailAction.RETRY, cost=0.01)
    await start(sm, "mr-2", "u-2")
    await commit(sm, "router", cost=0.04)
    await commit(sm, "parser")  # mr-2 at parser: no cost
    assert await sm.promote("router", 0, ["mr-1"]) == (1, 0)
    await commit(sm, "router", cost=0.02)
    await commit(sm, "parser", cost=0.5)


async def test_sums_per_user_and_step(redis: Any, keys: Keys, redis_url: str) -> None:
    """JSON rows per user and step, with attempts that cost money, per-user and overall totals."""
    await spend(redis, keys)
    doc = cli_json(keys, redis_url, "costs")
    rows = [(r["user_id"], r["step"], r["attempts"], r["usd"]) for r in doc["rows"]]
    assert rows == [
        ("u-1", "parser", 1, pytest.approx(0.5)),
        ("u-1", "router", 2, pytest.approx(0.03)),
        ("u-2", "router", 1, pytest.approx(0.04)),
    ]
    assert doc["by_user"] == {"u-1": pytest.approx(0.53), "u-2": pytest.approx(0.04)}
    assert doc["total_usd"] == pytest.approx(0.57) and doc["total_attempts"] == 4
    today = dt.datetime.now(dt.UTC).date()
    assert doc["to"] == today.isoformat()
    assert doc["from"] == (today - dt.timedelta(days=29)).isoformat()


async def test_table_and_user_filter(redis: Any, keys: Keys, redis_url: str) -> None:
    """The table has a subtotal for a user with several steps and a total; --user filters."""
    await spend(redis, keys)
    res = cli(keys, redis_url, "costs")
    assert res.returncode == 0, res.stderr
    body = [line.split() for line in res.stdout.splitlines()[4:]]
    assert body == [
        ["u-1", "parser", "1", "0.5000"],
        ["u-1", "router", "2", "0.0300"],
        ["u-1", "(all)", "3", "0.5300"],
        ["u-2", "router", "1", "0.0400"],
        ["total", "4", "0.5700"],
    ]
    doc = cli_json(keys, redis_url, "costs", "--user", "u-2")
    assert [r["user_id"] for r in doc["rows"]] == ["u-2"] and doc["total_usd"] == 0.04
    res = cli(keys, redis_url, "costs", "--user", "u-9")
    assert res.returncode == 0 and res.stdout.startswith("no LLM costs recorded")


async def test_since_reaches_older_days_and_partitions(redis: Any, redis_url: str) -> None:
    """Older days count only from --since on; every partition's totals are summed."""
    keys = Keys(prefix=f"t{uuid.uuid4().hex[:10]}", partitions=3)
    old = (dt.datetime.now(dt.UTC) - dt.timedelta(days=40)).date()
    for p in keys.all_partitions():  # as commit_steps writes them, on a day long past
        await redis.hincrbyfloat(keys.costs(p, old.isoformat()), "u-1|parser", 0.25)
        await redis.hincrby(keys.costs(p, old.isoformat()), "u-1|parser|n", 1)
    assert cli_json(keys, redis_url, "costs")["rows"] == []
    doc = cli_json(keys, redis_url, "costs", "--since", old.isoformat())
    assert doc["rows"] == [{"user_id": "u-1", "step": "parser", "attempts": 3, "usd": 0.75}]
    assert cli_json(keys, redis_url, "costs", "--since", "41d")["total_usd"] == 0.75
    assert cli_json(keys, redis_url, "costs", "--since", "39d")["total_usd"] == 0


async def test_bad_since_or_user_exits_2(keys: Keys, redis_url: str) -> None:
    """An unreadable --since, one more than ten years back, or a bad user id is bad usage."""
    for args in (["--since", "last tuesday"], ["--since", "1990-01-01"], ["--user", "a|b"]):
        res = cli(keys, redis_url, "costs", *args)
        assert res.returncode == 2, args
        assert res.stderr.startswith("saga: ") and res.stderr.count("\n") == 1


def test_days_are_utc_and_inclusive() -> None:
    """days_since lists UTC days from the day of --since to today, both included."""
    now = dt.datetime(2025, 3, 2, 1, 0, tzinfo=dt.UTC).timestamp()
    since = int(dt.datetime(2025, 2, 27, 23, 59, tzinfo=dt.UTC).timestamp() * 1000)
    assert days_since(since, now) == ["2025-02-27", "2025-02-28", "2025-03-01", "2025-03-02"]
    assert len(days_since(0, now)) == 30
    with pytest.raises(CliError):
        days_since(int(dt.datetime(2000, 1, 1, tzinfo=dt.UTC).timestamp() * 1000), now)


async def test_a_fraction_of_a_cent_is_not_printed_as_zero(
    redis: Any, keys: Keys, redis_url: str
) -> None:
    """$0.000013 (a cheap model call) reads 0.000013 in `saga costs` and `$0.000013` in
    `saga budget show`, not 0.0000."""
    sm = await machine(redis, keys)
    await start(sm, "mr-t", "u-t")
    await commit(sm, "router", cost=0.000013)
    rows = [line.split() for line in cli(keys, redis_url, "costs").stdout.splitlines()]
    assert ["u-t", "router", "1", "0.000013"] in rows, rows
    assert cli(keys, redis_url, "budget", "set", "u-t", "--daily", "1").returncode == 0
    shown = cli(keys, redis_url, "budget", "show").stdout.splitlines()[2].split()
    assert shown[:3] == ["u-t", "$1.0000", "$0.000013"], shown
