"""The Redis server killed (SIGKILL) and restarted from its AOF while sagas run: workers
stay up, report not-ready while it is down, resume by themselves, and every saga
completes with exactly one commit per step."""

from __future__ import annotations

import signal
import time
from collections import Counter
from dataclasses import replace
from typing import Any, cast

import anyio
import pytest
import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from saga.adapters.embedded_redis import EmbeddedServer
from saga.api.client import SagaClient
from saga.config.settings import Settings
from saga.state.connection import TRANSIENT_ERRORS, connect
from saga.state.keys import Keys
from saga.state.scripts import load_all
from saga.worker.executor import Executor
from saga.worker.ports import NullPorts
from tests.executor import pipelines
from tests.executor.conftest import SpawnWorker
from tests.executor.support import (
    SOAK,
    Worker,
    assert_one_commit_per_step,
    count_committed,
    running,
    saga_and_history,
    states,
    status,
    wait_until,
)

pytestmark = pytest.mark.anyio

OUTAGE_S = 2.5


class KillAfterRead(aioredis.Redis):
    """A real client that SIGKILLs the server right after one XREADGROUP brought entries
    (before the executor can claim them), and counts the claims lost to the outage."""

    server: EmbeddedServer | None = None
    failed_claims = 0

    async def xreadgroup(self, *args: Any, **kwargs: Any) -> Any:
        reply = await super().xreadgroup(*args, **kwargs)
        if reply and self.server is not None:
            server, self.server = self.server, None
            server.stop(signal.SIGKILL)
        return reply

    async def evalsha(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return await super().evalsha(*args, **kwargs)  # type: ignore[misc]
        except TRANSIENT_ERRORS:
            if args[0] == load_all()["claim_steps"].sha:
                self.failed_claims += 1
            raise


async def test_outage_between_read_and_claim_does_not_stop_the_executor(
    own_server: EmbeddedServer, keys: Keys
) -> None:
    """Redis dies between XREADGROUP and the claim: the executor stays up, the saga completes."""
    settings = Settings(block_ms=100, recovery_interval_s=0.2, promote_interval_s=0.1)
    pipe = pipelines.pipeline().with_overrides(lambda s: replace(s, lease_s=0.5))
    client = cast(
        KillAfterRead,
        KillAfterRead.from_url(
            own_server.url, retry=Retry(NoBackoff(), 0), retry_on_timeout=False, socket_timeout=10
        ),
    )
    await SagaClient(client, keys, pipe, settings).start("r-outage", "u1")
    executor = Executor(
        client=client,
        keys=keys,
        settings=settings,
        pipeline=pipe,
        steps=pipelines.STEPS,
        ports=NullPorts(),
        worker="w-outage",
    )
    try:
        async with running(executor):
            client.server = own_server  # armed: the next read with entries kills the server

            async def claim_gave_up() -> bool:  # the claim and its 4 re-sends all failed
                return client.failed_claims >= 5

            await wait_until(claim_gave_up, within=15, what="the claim to give up")
            assert not executor.health.redis_ok
            own_server.start()

            async def completed() -> bool:
                return await states(client, keys, ["r-outage"]) == ["completed"]

            await wait_until(completed, within=15, what="the saga to complete")
        saga, events = await saga_and_history(client, keys, "r-outage")
        assert_one_commit_per_step(saga, events, pipelines.STEPS)
    finally:
        await client.aclose()


async def kill_and_restart(server: EmbeddedServer, workers: list[Worker]) -> float:
    """SIGKILL the server, see every worker report not-ready, restart it, see them ready."""
    server.stop(signal.SIGKILL)
    down_at = time.monotonic()

    async def all_not_ready() -> bool:
        return all([await status(w.port, "/readyz") == 503 for w in workers])

    await wait_until(all_not_ready, within=10, what="/readyz 503 on every worker")
    # The outage's length is the scenario, not a guess: longer than the state machine's
    # re-send budget (1.75 s) and than the router's lease (2 s), so claims and commits
    # in flight fail for good and leases expire while the server is away.
    await anyio.sleep(OUTAGE_S)
    assert all([await status(w.port, "/livez") == 200 for w in workers])
    assert all([await status(w.port, "/readyz") == 503 for w in workers])
    assert all(w.alive() for w in workers)
    server.start()

    async def all_ready() -> bool:
        return all([await status(w.port, "/readyz") == 200 for w in workers])

    await wait_until(all_ready, within=15, what="/readyz 200 on every worker again")
    return time.monotonic() - down_at


async def run_through_restarts(
    spawn: SpawnWorker,
    base_env: dict[str, str],
    server: EmbeddedServer,
    keys: Keys,
    *,
    n: int,
    kills: int,
) -> None:
    env = {**base_env, "REDIS_URL": server.url, "SAGA_ROUTER_LEASE": "2"}
    workers = [spawn(env=env), spawn(env=env)]
    for w in workers:
        await w.wait_ready()
    rids = [f"slow-0.1-{i:04d}" for i in range(n)]
    client = connect(server.url)
    try:
        sagas = SagaClient(client, keys, pipelines.pipeline(), Settings())
        for rid in rids:
            await sagas.start(rid, "u1")
    finally:
        await client.aclose()
    for k in range(kills):
        client = connect(server.url)
        try:

            async def progressed(k: int = k, client: Any = client) -> bool:
                return await count_committed(client, keys, "grouper") >= n * (k + 1) // (kills + 2)

            await wait_until(progressed, within=60, what="some sagas to complete")
            assert await count_committed(client, keys, "grouper") < n, "kill came too late"
        finally:
            await client.aclose()  # its connections die with the server
        downtime = await kill_and_restart(server, workers)
        print(f"\nrestart {k + 1}: workers not ready, then ready again after {downtime:.2f}s")
    client = connect(server.url)
    try:

        async def all_done() -> bool:
            return set(await states(client, keys, rids)) == {"completed"}

        await wait_until(all_done, within=120, what="every saga to complete", every=0.1)
        seen: Counter[str] = Counter()
        for rid in rids:
            saga, events = await saga_and_history(client, keys, rid)
            assert_one_commit_per_step(saga, events, pipelines.STEPS)
            seen.update(e.event.value for e in events)
        assert all(w.alive() for w in workers)
        logged = Counter(e["event"] for w in workers for e in w.events() if "event" in e)
        print(
            f"{n} sagas completed, one commit per step; history: {seen['reclaimed']} reclaimed, "
            f"{seen['fenced']} fenced; logs: {logged['commit_deferred']} commit_deferred, "
            f"{logged['claim_deferred']} claim_deferred, {logged['attempt_abandoned']} "
            f"attempt_abandoned, {logged['heartbeat_failed']} heartbeat_failed"
        )
    finally:
        await client.aclose()


async def test_redis_killed_and_restarted_mid_run(
    spawn: SpawnWorker, base_env: dict[str, str], own_server: EmbeddedServer, keys: Keys
) -> None:
    """50 sagas in flight, the server SIGKILLed and restarted: all complete, one commit each."""
    await run_through_restarts(spawn, base_env, own_server, keys, n=50, kills=1)


@pytest.mark.slow
async def test_redis_killed_and_restarted_mid_run_soak(
    spawn: SpawnWorker, base_env: dict[str, str], own_server: EmbeddedServer, keys: Keys
) -> None:
    """500 sagas (5,000 with SAGA_SOAK=1) through three server restarts, one commit each."""
    n = 5000 if SOAK else 500
    await run_through_restarts(spawn, base_env, own_server, keys, n=n, kills=3)
