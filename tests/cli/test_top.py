"""saga top: per-step queue numbers that agree with the keyspace, breakers, live refresh."""

from __future__ import annotations

import signal
import subprocess
from typing import Any

import anyio
import pytest

from saga.adapters.breaker import BreakerPolicy, CircuitBreaker
from saga.cli.cmd_top import Sample, rates
from saga.state.keys import GROUP, Keys
from saga.state.model import FailAction
from saga.state.queries import StepStats
from saga.state.streams import ensure_groups
from tests.cli.inspect_support import (
    cli,
    cli_json,
    commit,
    fail,
    machine,
    python,
    run_to_dead,
    spawn,
    start,
)
from tests.state.helpers import claim_next

pytestmark = pytest.mark.anyio
HEAVY = ("litellm", "pypdf", "rapidfuzz", "httpx", "opentelemetry.exporter")


async def busy_keyspace(redis: Any, keys: Keys) -> None:
    """router: one saga undelivered, one claimed and running, one waiting to retry, one
    committed; parser: one dead letter."""
    sm = await machine(redis, keys)
    await run_to_dead(sm, "mr-dead", "parser")
    await start(sm, "mr-retry")
    await fail(sm, "router", FailAction.RETRY, worker="w2", error=("E", "later"))
    await start(sm, "mr-running")
    await claim_next(sm, "router", "w1")
    await start(sm, "mr-waiting")


async def from_keyspace(redis: Any, keys: Keys, step: str) -> dict[str, int]:
    """The same numbers read directly, one command each."""
    ready = keys.ready(0, step)
    (group,) = [g for g in await redis.xinfo_groups(ready) if g["name"] == GROUP.encode()]
    return {
        "length": await redis.xlen(ready),
        "lag": group["lag"],
        "pending": (await redis.xpending(ready, GROUP))["pending"],
        "delayed": await redis.zcard(keys.delayed(0, step)),
        "dead": await redis.xlen(keys.dead(0, step)),
    }


async def test_once_json_agrees_with_the_keyspace(redis: Any, keys: Keys, redis_url: str) -> None:
    """--once --json: length, lag, pending, retries waiting and dead letters as Redis has them."""
    await busy_keyspace(redis, keys)
    doc = cli_json(keys, redis_url, "top", "--once", "--interval", "0")
    steps = {s["step"]: s for s in doc["steps"]}
    assert sorted(steps) == ["grouper", "parser", "router"]
    for name in steps:
        direct = await from_keyspace(redis, keys, name)
        assert {k: steps[name][k] for k in direct} == direct, name
    router, parser = steps["router"], steps["parser"]
    assert (router["length"], router["lag"], router["pending"], router["delayed"]) == (4, 1, 1, 1)
    assert (parser["dead"], parser["dead_lettered"], parser["failed"]) == (1, 1, 1)
    # w1 and w2 are consumers with no presence (no worker process): not live workers.
    assert (router["committed"], router["retried"], router["workers"]) == (1, 1, 0)
    assert router["throughput"] is None and doc["window_s"] is None
    assert doc["breakers"]["llm"]["state"] == "closed"


async def test_once_table_shows_steps_and_breakers(redis: Any, keys: Keys,
                                                   redis_url: str) -> None:  # fmt: skip
    """The table has a row per step and a breaker line; an open breaker says so."""
    await busy_keyspace(redis, keys)
    await CircuitBreaker(redis, keys, "llm", BreakerPolicy(failures=1)).record_failure()
    res = cli(keys, redis_url, "top", "--once", "--interval", "0")
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0].split() == [
        "step", "ready", "pending", "retrying", "parked", "deferred", "dead", "done/s", "workers",
    ]  # fmt: skip
    # ready is what waits for a worker (1 undelivered), not the stream's 4 entries;
    # w1 and w2 are consumers with no presence (no worker process): not live workers.
    assert lines[4].split() == ["router", "1", "1", "1", "0", "0", "0", "-", "0"]
    assert "llm open" in lines[-1] and "billing closed" in lines[-1]
    assert "embedding closed" in lines[-1]  # its own breaker, not opened with the llm's


async def test_ready_is_zero_when_nothing_waits(redis: Any, keys: Keys, redis_url: str) -> None:
    """Every entry taken and committed: `ready` reads 0 though the stream still holds them."""
    sm = await machine(redis, keys)
    for rid in ("mr-1", "mr-2", "mr-3"):
        await start(sm, rid)
        await commit(sm, "router")
    assert await redis.xlen(keys.ready(0, "router")) == 3
    res = cli(keys, redis_url, "top", "--once", "--interval", "0")
    row = next(line.split() for line in res.stdout.splitlines() if line.startswith("router"))
    assert row[:3] == ["router", "0", "0"], res.stdout


async def test_once_samples_twice_for_throughput(redis: Any, keys: Keys,
                                                 redis_url: str) -> None:  # fmt: skip
    """--once with an interval reads twice, that far apart, and reports a rate."""
    await busy_keyspace(redis, keys)
    doc = cli_json(keys, redis_url, "top", "--once", "--interval", "0.2")
    assert 0.2 <= doc["window_s"] < 5
    assert [s["throughput"] for s in doc["steps"]] == [0.0, 0.0, 0.0]


def test_throughput_is_commits_per_second_between_samples() -> None:
    """The rate is the growth of the committed counter over the time between samples."""

    def stats(committed: int) -> StepStats:
        return StepStats(step="parser", length=0, lag=0, pending=0, delayed=0, dead=0,
                         workers=0, committed=committed, failed=0, retried=0,
                         dead_lettered=0)  # fmt: skip

    before, after = Sample([stats(10)], {}, 100.0, []), Sample([stats(30)], {}, 102.0, [])
    assert rates(before, after) == {"parser": 10.0}
    assert rates(None, after) == {"parser": None}


async def test_live_view_refreshes_until_interrupted(redis: Any, keys: Keys,
                                                     redis_url: str) -> None:  # fmt: skip
    """Without --once it prints a view per interval; Ctrl-C (SIGINT) exits 0."""
    await busy_keyspace(redis, keys)
    proc = spawn(keys, redis_url, "top", "--interval", "0.1", stdout=subprocess.PIPE)
    assert proc.stdout is not None
    try:
        with anyio.fail_after(20):
            seen = 0
            while seen < 2:
                line = await anyio.to_thread.run_sync(proc.stdout.readline)
                seen += line.startswith("breakers")
        proc.send_signal(signal.SIGINT)
        await anyio.to_thread.run_sync(lambda: proc.wait(timeout=20))
    finally:
        proc.kill() if proc.poll() is None else None
    assert proc.returncode == 0


async def test_empty_keyspace_and_bad_interval(keys: Keys, redis_url: str) -> None:
    """No registered steps is a hint, not an error; a negative interval is bad usage."""
    res = cli(keys, redis_url, "top", "--once", "--interval", "0")
    assert res.returncode == 0 and "no steps registered yet" in res.stdout
    doc = cli_json(keys, redis_url, "top", "--once", "--interval", "0")
    assert doc["steps"] == []
    assert cli(keys, redis_url, "top", "--once", "--interval", "-1").returncode == 2
    assert cli(keys, redis_url, "top", "--interval", "0").returncode == 2


async def test_cold_start_imports_nothing_heavy(redis: Any, keys: Keys, redis_url: str) -> None:
    """`saga top --once --json` never imports litellm, pypdf, rapidfuzz, httpx or exporters."""
    await busy_keyspace(redis, keys)
    res = python(keys, redis_url, "-X", "importtime", "-m", "saga.cli.main",
                 "top", "--once", "--json", "--interval", "0")  # fmt: skip
    assert res.returncode == 0, res.stderr[-2000:]
    modules = {line.rsplit("|", 1)[-1].strip() for line in res.stderr.splitlines()
               if line.startswith("import time:")}  # fmt: skip
    assert {"saga.state.queries", "saga.adapters.breaker"} <= modules
    assert [m for m in modules if m.startswith(HEAVY)] == []


async def test_undo_steps_have_rows_after_their_steps(
    redis: Any, keys: Keys, redis_url: str
) -> None:
    """A step with a compensation (its workers made the groups of undo:<step>) has a
    second row with its undo's queues; the JSON row names the step it undoes."""
    await busy_keyspace(redis, keys)
    await ensure_groups(redis, keys, ["undo:parser"])
    await redis.xadd(keys.ready(0, "undo:parser"), {"r": "mr-undo"})
    await redis.zadd(keys.delayed(0, "undo:parser"), {"mr-later": 1})
    doc = cli_json(keys, redis_url, "top", "--once", "--interval", "0")
    rows = [(s["step"], s["undoes"], s["lag"], s["delayed"]) for s in doc["steps"]]
    assert [r[:2] for r in rows] == [
        ("grouper", ""), ("parser", ""), ("undo:parser", "parser"), ("router", "")
    ]  # fmt: skip
    assert rows[2][2:] == (1, 1)
    res = cli(keys, redis_url, "top", "--once", "--interval", "0")
    row = next(line.split() for line in res.stdout.splitlines() if line.startswith("undo:"))
    assert row[:4] == ["undo:parser", "1", "0", "1"], res.stdout
