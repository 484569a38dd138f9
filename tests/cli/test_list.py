"""saga list: served from the indexes, filters, limits, partitions and lazy pruning."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from saga.state.keys import Keys
from saga.state.machine import StateMachine
from saga.state.model import FailAction, SagaState
from tests.cli.inspect_support import cli, cli_json, fail, machine, run_to_dead, start
from tests.state.helpers import server_ms, wait_lease_expired, wait_until

pytestmark = pytest.mark.anyio


async def three_sagas(sm: StateMachine) -> dict[str, int]:
    """mr-b failed at parser (u-1), mr-c waiting to retry at router (u-2), mr-a pending
    at router (u-1), created in that order on distinct milliseconds; returns created ms.
    (mr-a comes last: its undelivered entry would be read by the later claims.)"""
    created: dict[str, int] = {}
    for rid in ("mr-b", "mr-c", "mr-a"):
        await wait_lease_expired(sm.client, max(created.values(), default=0))
        if rid == "mr-b":
            await run_to_dead(sm, rid, "parser")
        elif rid == "mr-c":
            await start(sm, rid, "u-2")
            await fail(sm, "router", FailAction.RETRY)
        else:
            await start(sm, rid)
        created[rid] = int(await sm.client.hget(sm.keys.saga(rid), "created"))
    return created


def records(keys: Keys, redis_url: str, *args: str) -> list[str]:
    return [s["record_id"] for s in cli_json(keys, redis_url, "list", *args)["sagas"]]


async def test_table_and_json_newest_first(redis: Any, keys: Keys, redis_url: str) -> None:
    """Every saga, newest first: a table for people and the same rows as JSON."""
    sm = await machine(redis, keys)
    await three_sagas(sm)
    res = cli(keys, redis_url, "list")
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0].split() == [
        "record", "user", "state", "step", "attempts", "updated", "cost", "error",
    ]  # fmt: skip
    assert [line.split()[:5] for line in lines[2:]] == [
        ["mr-a", "u-1", "pending", "router", "0"],
        ["mr-c", "u-2", "waiting_retry", "router", "1"],
        ["mr-b", "u-1", "failed", "parser", "1"],
    ]
    assert "ParseError: no table in mr-b" in res.stdout
    rows = cli_json(keys, redis_url, "list")["sagas"]
    assert [r["record_id"] for r in rows] == ["mr-a", "mr-c", "mr-b"]
    assert set(rows[0]) == {
        "record_id", "user_id", "state", "step", "step_attempts", "created_ms", "updated_ms",
        "total_cost", "error_class", "error_message", "needs_review", "review_reason",
        "parked_reason",
    }  # fmt: skip


async def test_filters_by_state_step_and_user(redis: Any, keys: Keys, redis_url: str) -> None:
    """--state, --step and --user select, alone and together."""
    await three_sagas(await machine(redis, keys))
    assert records(keys, redis_url, "--state", "failed") == ["mr-b"]
    assert records(keys, redis_url, "--step", "router") == ["mr-a", "mr-c"]
    assert records(keys, redis_url, "--user", "u-1") == ["mr-a", "mr-b"]
    assert records(keys, redis_url, "--user", "u-1", "--state", "pending") == ["mr-a"]
    assert records(keys, redis_url, "--state", "waiting_retry", "--step", "parser") == []
    assert records(keys, redis_url, "--user", "u-9") == []


async def test_since_and_limit(redis: Any, keys: Keys, redis_url: str) -> None:
    """--since keeps sagas created at or after T; --limit keeps the newest N."""
    created = await three_sagas(await machine(redis, keys))
    since = dt.datetime.fromtimestamp(created["mr-c"] / 1000, dt.UTC).isoformat()
    assert records(keys, redis_url, "--since", since) == ["mr-a", "mr-c"]
    assert records(keys, redis_url, "--since", since, "--state", "failed") == []
    assert records(keys, redis_url, "--since", since, "--user", "u-2") == ["mr-c"]
    assert records(keys, redis_url, "--since", "1h", "--limit", "2") == ["mr-a", "mr-c"]
    assert records(keys, redis_url, "--limit", "1") == ["mr-a"]
    future = dt.datetime.now(dt.UTC) + dt.timedelta(days=1)
    assert records(keys, redis_url, "--since", future.isoformat()) == []
    res = cli(keys, redis_url, "list", "--since", "yesterday-ish")
    assert res.returncode == 2 and "--since" in res.stderr
    assert cli(keys, redis_url, "list", "--limit", "0").returncode == 2
    assert cli(keys, redis_url, "list", "--user", "a b").returncode == 2


async def test_expired_members_are_pruned_lazily(redis: Any, keys: Keys, redis_url: str) -> None:
    """A member whose saga hash expired is skipped and removed from the index read."""
    sm = await machine(redis, keys)
    await start(sm, "mr-old")
    await start(sm, "mr-new")
    await redis.pexpire(keys.saga("mr-old"), 1)

    async def gone() -> bool:
        return not await redis.exists(keys.saga("mr-old"))

    await wait_until(gone, what="the saga hash to expire")
    assert await redis.zscore(keys.created_index(0), "mr-old") is not None
    assert records(keys, redis_url) == ["mr-new"]
    assert await redis.zscore(keys.created_index(0), "mr-old") is None
    assert await redis.zscore(keys.user_index(0, "u-1"), "mr-old") is not None
    assert records(keys, redis_url, "--user", "u-1") == ["mr-new"]
    assert await redis.zscore(keys.user_index(0, "u-1"), "mr-old") is None
    pending = keys.state_index(0, SagaState.PENDING)
    assert records(keys, redis_url, "--state", "pending") == ["mr-new"]
    assert await redis.zscore(pending, "mr-old") is None


async def test_merges_partitions_by_time(redis: Any, redis_url: str) -> None:
    """With several partitions the indexes are merged newest first, and --limit spans them."""
    import uuid

    keys = Keys(prefix=f"t{uuid.uuid4().hex[:10]}", partitions=4)
    sm = await machine(redis, keys)
    order = [f"mr-{i}" for i in range(8)]
    assert len({keys.partition_of(r) for r in order}) > 1
    for rid in order:
        await wait_lease_expired(redis, await server_ms(redis))
        await start(sm, rid)
    assert records(keys, redis_url) == order[::-1]
    assert records(keys, redis_url, "--limit", "3") == order[::-1][:3]
    assert records(keys, redis_url, "--user", "u-1", "--limit", "5") == order[::-1][:5]
