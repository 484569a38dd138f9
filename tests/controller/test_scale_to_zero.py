"""Scale to zero is safe by construction: with no worker of a step running, the
controller moves its due retries and its dead workers' entries back into the stream,
which raises the lag KEDA wakes the step on; a worker started then finishes them all.
Real `saga worker` and `saga controller` processes against a real server."""

from __future__ import annotations

import signal
from typing import Any

import pytest

from saga.api.client import SagaClient
from saga.state.keys import Keys
from tests.controller.support import Procs, lag, metric, pending_count
from tests.executor.support import (
    assert_one_commit_per_step,
    saga_and_history,
    states,
    status,
    wait_until,
)

pytestmark = pytest.mark.anyio

N = 8


async def scrape(port: int) -> str:
    import httpx

    async with httpx.AsyncClient() as http:
        return (await http.get(f"http://127.0.0.1:{port}/metrics")).text


async def test_retries_waiting_at_zero_workers_are_promoted_and_completed(
    redis: Any, keys: Keys, base_env: dict[str, str], procs: Procs, sagas: SagaClient
) -> None:
    """Sagas fail once; the worker stops; the controller promotes their retries (lag N, the
    gauges say so with no worker running); a new worker completes every one exactly once."""
    # The first retry is due 2^1 * 2 = 4 s after the failure: after the worker is gone.
    env = {**base_env, "SAGA_ROUTER_BACKOFF": "2"}
    rids = [f"once-{i}" for i in range(N)]
    worker = procs.worker(env)
    await worker.wait_ready(within=90)
    for rid in rids:
        await sagas.start(rid, "u1")

    async def all_waiting() -> bool:
        return await states(redis, keys, rids) == ["waiting_retry"] * N

    await wait_until(all_waiting, within=30, what="every saga waiting for its retry")
    worker.signal(signal.SIGTERM)
    assert await worker.wait_exit(within=30) == 0
    # Scaled to zero: nothing the lag or pending triggers can see, N retries in the zset.
    assert await redis.zcard(keys.delayed(0, "router")) == N
    assert (await lag(redis, keys, "router"), await pending_count(redis, keys, "router")) == (0, 0)

    controller = procs.controller(env)
    await controller.wait_ready(within=90)

    async def promoted() -> bool:
        return await redis.zcard(keys.delayed(0, "router")) == 0 and (
            await lag(redis, keys, "router") == N
        )

    await wait_until(promoted, within=30, what="the controller to promote", on_timeout=procs.tails)
    assert await states(redis, keys, rids) == ["pending"] * N

    async def gauges_say_so() -> bool:
        text = await scrape(controller.port)
        return metric(text, "saga_stream_lag", step="router") == N and (
            metric(text, "saga_retries_waiting", step="router") == 0
        )

    await wait_until(gauges_say_so, within=20, what="the controller's gauges to show the lag")
    text = await scrape(controller.port)
    assert metric(text, "saga_controller_promoted_total", step="router") == N

    procs.worker(env)

    async def all_completed() -> bool:
        return await states(redis, keys, rids) == ["completed"] * N

    await wait_until(all_completed, within=60, what="every saga completed", on_timeout=procs.tails)
    for rid in rids:
        saga, events = await saga_and_history(redis, keys, rid)
        assert_one_commit_per_step(saga, events, ["router", "parser", "grouper"])
        assert [e.event.value for e in events].count("promoted") == 1
    controller.signal(signal.SIGTERM)
    assert await controller.wait_exit(within=30) == 0


async def test_entry_of_a_killed_worker_is_requeued_for_the_next_one(
    redis: Any, keys: Keys, base_env: dict[str, str], procs: Procs, sagas: SagaClient
) -> None:
    """A worker killed mid-step leaves its entry pending; with no worker of the step left,
    the controller requeues it (lag 1, pending 0) and the next worker reclaims the saga."""
    env = {**base_env, "SAGA_ROUTER_LEASE": "1"}
    worker = procs.worker(env, "router")
    await worker.wait_ready(within=90)
    await sagas.start("hangonce-1", "u1")

    async def running() -> bool:
        return await states(redis, keys, ["hangonce-1"]) == ["running"]

    await wait_until(running, within=60, what="the worker to claim", on_timeout=procs.tails)
    worker.kill()
    controller = procs.controller(env)
    await controller.wait_ready(within=90)

    async def requeued() -> bool:
        return (await lag(redis, keys, "router"), await pending_count(redis, keys, "router")) == (
            1,
            0,
        )

    await wait_until(requeued, within=60, what="the controller to requeue", on_timeout=procs.tails)

    async def logged() -> bool:  # the line is written after the script, flushed in a batch
        return bool(controller.logged("entries_requeued"))

    await wait_until(logged, within=30, what="entries_requeued logged", on_timeout=procs.tails)
    procs.worker(env)
    await wait_until(
        lambda: _completed(redis, keys, "hangonce-1"),
        within=120,
        what="completed",
        on_timeout=procs.tails,
    )
    saga, events = await saga_and_history(redis, keys, "hangonce-1")
    assert_one_commit_per_step(saga, events, ["router", "parser", "grouper"])
    assert "reclaimed" in [e.event.value for e in events]

    async def alive() -> bool:
        return await status(controller.port, "/livez") == 200

    await wait_until(alive, within=30, what="the controller's /livez", on_timeout=procs.tails)


async def _completed(redis: Any, keys: Keys, rid: str) -> bool:
    return await states(redis, keys, [rid]) == ["completed"]
