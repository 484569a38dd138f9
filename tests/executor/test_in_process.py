"""Executors run in the test's own process: 1,000 no-op sagas with the Redis round trips
each step transition costs, and consumer pruning that spares consumers with pending work."""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace
from typing import Any

import anyio
import anyio.lowlevel
import pytest
import structlog

from saga.adapters.embedded_redis import EmbeddedServer
from saga.api.client import SagaClient
from saga.config.settings import Settings
from saga.state.connection import connect
from saga.state.keys import GROUP, Keys
from saga.state.model import EventType
from saga.state.reads import parse_event
from saga.state.replies import text
from saga.state.streams import ensure_groups, prune_consumers
from saga.worker.executor import Executor
from saga.worker.ports import NullPorts
from tests.executor import pipelines
from tests.executor.support import (
    SOAK,
    assert_one_commit_per_step,
    count_committed,
    running,
    saga_and_history,
    states,
    wait_until,
)

pytestmark = pytest.mark.anyio

SETTINGS = Settings(block_ms=100, recovery_interval_s=0.2, promote_interval_s=0.1, drain_s=5)


class Sends:
    """Counts socket writes of one client: one per command, or per whole pipeline."""

    def __init__(self, client: Any) -> None:
        self.n = 0
        pool = client.connection_pool
        meter = self

        class Counting(pool.connection_class):  # type: ignore[name-defined,misc]
            async def send_packed_command(self, command: Any, check_health: bool = True) -> None:
                meter.n += 1
                await super().send_packed_command(command, check_health)

        pool.connection_class = Counting


async def command_calls(client: Any) -> Counter[str]:
    info = await client.info("commandstats")
    return Counter({k.removeprefix("cmdstat_"): int(v["calls"]) for k, v in info.items()})


@pytest.fixture
def quiet_logs() -> Iterator[None]:
    """Warnings only while measuring: rendering two console lines per step is not the engine."""
    saved = structlog.get_config()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    yield
    structlog.configure(**saved)


@pytest.fixture
async def own_client(own_server: EmbeddedServer) -> AsyncIterator[Any]:
    client = connect(own_server.url, health_check_interval=0)
    yield client
    await client.aclose()


def executor_for(client: Any, keys: Keys, concurrency: int, worker: str = "w-1") -> Executor:
    pipe = pipelines.pipeline().with_overrides(lambda s: replace(s, concurrency=concurrency))
    return Executor(
        client=client,
        keys=keys,
        settings=SETTINGS,
        pipeline=pipe,
        steps=pipelines.STEPS,
        ports=NullPorts(),
        worker=worker,
    )


async def commits_per_saga(client: Any, keys: Keys, rids: list[str]) -> Counter[str]:
    """How many sagas have each commit signature (steps committed, in order)."""
    pipe = client.pipeline(transaction=False)
    for rid in rids:
        pipe.xrange(keys.history(rid))
    shapes: Counter[str] = Counter()
    for rows in await pipe.execute():
        events = [parse_event(i, f) for i, f in rows]
        shapes[",".join(e.step for e in events if e.event == EventType.COMMITTED)] += 1
    return shapes


@pytest.mark.parametrize("concurrency", [8, 50])
async def test_thousand_noop_sagas_and_round_trips_per_transition(
    own_server: EmbeddedServer, own_client: Any, keys: Keys, concurrency: int, quiet_logs: None
) -> None:
    """1,000 no-op sagas: one commit per step, ≤ 2.5 XREADGROUP + EVALSHA per transition."""
    n = 10_000 if SOAK else 1_000
    rids = [f"n-{i:05d}" for i in range(n)]
    sagas = SagaClient(own_client, keys, pipelines.pipeline(), SETTINGS)
    for rid in rids:
        await sagas.start(rid, "u1")
    worker_client = connect(own_server.url, health_check_interval=0)
    sends = Sends(worker_client)
    executor = executor_for(worker_client, keys, concurrency)
    before = await command_calls(own_client)
    started = time.monotonic()
    try:
        async with running(executor):

            async def all_done() -> bool:
                return await count_committed(own_client, keys, "grouper") == n

            await wait_until(all_done, within=120, what=f"{n} sagas to complete", every=0.05)
            elapsed = time.monotonic() - started
    finally:
        await worker_client.aclose()
    after = await command_calls(own_client)
    delta = after - before
    transitions = 3 * n
    calls = delta["xreadgroup"] + delta["evalsha"]
    per_transition = calls / transitions
    print(
        f"\n{n} no-op sagas, concurrency {concurrency}: {elapsed:.2f}s "
        f"({transitions / elapsed:.0f} transitions/s); per step transition: "
        f"{per_transition:.3f} calls (XREADGROUP {delta['xreadgroup'] / transitions:.3f} + "
        f"EVALSHA {delta['evalsha'] / transitions:.3f}), "
        f"{sends.n / transitions:.3f} socket round trips (every command and pipeline, "
        f"housekeeping included); commit pipelines: {executor.committer.batches}"
    )
    assert set(await states(own_client, keys, rids)) == {"completed"}
    assert await commits_per_saga(own_client, keys, rids) == {"router,parser,grouper": n}
    # A commit batch is one commit_steps call: fewer script calls than commits, and at
    # least one per commit pipeline (and one claim call per read batch).
    assert executor.committer.batches <= delta["evalsha"] < transitions
    assert per_transition <= 2.5


async def test_pruning_spares_consumers_with_pending_entries(redis: Any, keys: Keys) -> None:
    """Pruning removes an idle dead consumer, keeps one with pending work (later recovered)."""
    pipe = pipelines.pipeline().with_overrides(lambda s: replace(s, lease_s=0.3))
    sagas = SagaClient(redis, keys, pipe, SETTINGS)
    await sagas.start("p-1", "u1")
    ready = keys.ready(0, "router")
    await ensure_groups(redis, keys, pipelines.STEPS)
    await redis.xreadgroup(GROUP, "dead-busy", {ready: ">"}, count=1)  # now pending there
    await redis.xgroup_createconsumer(ready, GROUP, "dead-idle")
    await redis.xgroup_createconsumer(ready, GROUP, "live")

    removed = await prune_consumers(redis, ready, keep="live", idle_ms=0)

    consumers = {
        text(c["name"]): int(c["pending"]) for c in await redis.xinfo_consumers(ready, GROUP)
    }
    assert removed == 1
    assert consumers == {"dead-busy": 1, "live": 0}
    executor = Executor(
        client=redis,
        keys=keys,
        settings=SETTINGS,
        pipeline=pipe,
        steps=pipelines.STEPS,
        ports=NullPorts(),
        worker="live",
    )
    async with running(executor):

        async def done() -> bool:
            return await states(redis, keys, ["p-1"]) == ["completed"]

        await wait_until(done, within=10, what="the dead consumer's entry to be recovered")
    saga, events = await saga_and_history(redis, keys, "p-1")
    assert_one_commit_per_step(saga, events, pipelines.STEPS)
    assert await prune_consumers(redis, ready, keep="live", idle_ms=0) == 1  # now empty: gone


class CrashingOncePorts(NullPorts):
    """A defect outside the step (an adapter raising where it never should), once."""

    def __init__(self) -> None:
        self.crashed = 0

    def for_attempt(self, claim: Any) -> Any:
        if self.crashed == 0 and claim.step == "parser":
            self.crashed += 1
            raise RuntimeError("adapter defect")
        return super().for_attempt(claim)


async def test_an_attempt_crashing_outside_its_step_leaves_the_entry_and_the_worker_runs_on(
    redis: Any, keys: Keys
) -> None:
    """The crash is logged, nothing is acknowledged, the worker keeps serving, and
    recovery re-runs the step once its lease has expired: one commit per step."""
    pipe = pipelines.pipeline().with_overrides(lambda s: replace(s, lease_s=0.5))
    sagas = SagaClient(redis, keys, pipe, SETTINGS)
    await sagas.start("crash-1", "u1")
    await sagas.start("fine-1", "u1")
    ports = CrashingOncePorts()
    executor = Executor(client=redis, keys=keys, settings=SETTINGS, pipeline=pipe,
                        steps=pipelines.STEPS, ports=ports, worker="w-1")  # fmt: skip
    with structlog.testing.capture_logs() as logs:
        async with running(executor):

            async def done() -> bool:
                return await states(redis, keys, ["crash-1", "fine-1"]) == ["completed"] * 2

            await wait_until(done, within=20, what="both sagas to complete")
    assert ports.crashed == 1
    crashed = [e for e in logs if e["event"] == "attempt_crashed"]
    assert len(crashed) == 1 and crashed[0]["step"] == "parser"
    for rid in ("crash-1", "fine-1"):
        saga, events = await saga_and_history(redis, keys, rid)
        assert_one_commit_per_step(saga, events, pipelines.STEPS)
    reclaims = [e for rid in ("crash-1", "fine-1")
                for e in (await saga_and_history(redis, keys, rid))[1]
                if e.event == EventType.RECLAIMED]  # fmt: skip
    assert [(e.step, e.previous_attempt) for e in reclaims] == [("parser", 1)]


async def test_a_stop_during_a_claim_still_runs_and_commits_what_was_claimed(
    redis: Any, keys: Keys
) -> None:
    """SIGTERM between the claim script and its reply: the claimed step is started and
    committed within the drain, not left pending until its lease expires."""
    sagas = SagaClient(redis, keys, pipelines.pipeline(), SETTINGS)
    executor = executor_for(redis, keys, concurrency=4)
    real_claim = executor.sm.claim
    claimed, release = anyio.Event(), anyio.Event()

    async def claim_then_wait(*args: Any, **kwargs: Any) -> Any:
        outcomes = await real_claim(*args, **kwargs)
        if outcomes:
            claimed.set()
            await release.wait()  # the stop arrives here
        return outcomes

    executor.sm.claim = claim_then_wait  # type: ignore[method-assign]
    async with anyio.create_task_group() as tg:
        tg.start_soon(executor.run)
        await sagas.start("stop-1", "u1")
        with anyio.fail_after(10):
            await claimed.wait()
        executor.stop()
        # Let the executor act on the stop (its loops are cancelled a couple of event-loop
        # turns later; counted in turns, not time): the claim must survive that.
        for _ in range(20):
            await anyio.lowlevel.checkpoint()
        release.set()
    _, events = await saga_and_history(redis, keys, "stop-1")
    assert [e.step for e in events if e.event == EventType.COMMITTED] == ["router"]
