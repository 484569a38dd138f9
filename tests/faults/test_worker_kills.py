"""Workers killed: kill -9 continuously mid-step, and SIGTERM while they work. Every saga
completes with one commit per step; killed steps are re-run (the run log counts them)."""

from __future__ import annotations

import random
import signal
import time

import anyio
import pytest

from saga.state.replies import text
from tests.executor.support import SOAK, wait_until
from tests.faults import runlog
from tests.faults.harness import FaultRun

pytestmark = pytest.mark.anyio

LLM = {"SAGA_LLM_MOCK_RESPONSE": '{"ok": true}'}
"""llm- sagas ask the user's LLM once (litellm's mock, priced): each answer billed once."""

NO_EXPIRY_CAP = {f"SAGA_{s.upper()}_MAX_LEASE_EXPIRIES": "1000" for s in runlog.STEPS}
"""The soak kills the busiest worker every ~0.6 s, so a 0.3-0.8 s step dies on ~40% of
its attempts and, over 30,000 steps, some die 8 times in a row: the lease-expiry budget
(meant for an executor that crashes on a record) would dead-letter them by design."""


async def busy_worker(run: FaultRun, rng: random.Random, within: float = 5.0) -> object | None:
    """A live worker that holds a running step now (a kill then lands mid-step): sampled
    again until one does, for ``within`` seconds; then any live worker."""
    deadline = time.monotonic() + within
    while True:
        pipe = run.redis.pipeline(transaction=False)
        for rid in rng.sample(run.extra["rids"], min(40, len(run.extra["rids"]))):
            pipe.hmget(run.keys.saga(rid), "state", "worker")
        names = {text(w) for state, w in await pipe.execute() if text(state) == "running"}
        live = [w for w in run.workers if w.alive() and w.pid not in run.killed]
        busy = [w for w in live if any(w.owns(n) for n in names)]
        if busy or not live or time.monotonic() > deadline:
            return rng.choice(busy or live) if live else None
        await anyio.sleep(0.02)


async def kill_continuously(run: FaultRun, n: int, kills: int, seed: int, **env: str) -> None:
    rng = random.Random(seed)
    rids = [f"slow-0.{rng.randint(3, 8)}-{i:05d}" if i % 4 else f"k-{i:05d}" for i in range(n)]
    run.extra["rids"] = rids
    await run.spawn_ready(3, **LLM, **env)
    await run.start(rids)
    for _ in range(kills):
        await anyio.sleep(rng.uniform(0.3, 0.6))
        victim = await busy_worker(run, rng)
        if victim is None:
            break
        run.kill(victim)  # type: ignore[arg-type]
        run.spawn(**LLM, **env)  # the Deployment's replacement pod
    run.fault_end = time.monotonic()
    run.extra.pop("rids")
    tally = await run.finish(rids, within=180)
    assert run.faults == kills
    assert tally.reclaimed >= kills // 2, "the kills did not land mid-step"
    assert tally.executions > 3 * n  # killed steps ran again (at least once)


async def test_kill9_continuously(run: FaultRun) -> None:
    """kill -9 of a busy worker every 0.3-0.6 s (replaced each time): 200 sagas all complete."""
    await kill_continuously(run, n=200, kills=8, seed=17)


@pytest.mark.slow
async def test_kill9_with_paid_llm_answers(run: FaultRun) -> None:
    """20 sagas that each pay for an LLM answer, the busiest worker killed twice mid-step:
    every answer is billed exactly once (a reused answer is not paid again). Slow: each
    new worker imports litellm at its first call (tens of seconds on a busy 2-core box);
    tests/executor/test_llm_steps.py keeps a one-saga version in the default run."""
    rng = random.Random(5)
    rids = [f"llm-1-{i:02d}" for i in range(20)]
    run.extra["rids"] = rids
    await run.spawn_ready(3, **LLM)
    await run.start(rids)

    async def one_running() -> bool:  # the first LLM call imports litellm: seconds here
        states = [await run.redis.hget(run.keys.saga(r), "state") for r in rids]
        return any(text(st) == "running" for st in states)

    for _ in range(2):
        await wait_until(one_running, within=60, what="a saga running mid-step")
        victim = await busy_worker(run, rng)
        assert victim is not None
        run.kill(victim)  # type: ignore[arg-type]
        run.spawn(**LLM)
    run.fault_end = time.monotonic()
    run.extra.pop("rids")
    await run.finish(rids, within=120)


async def test_sigterm_during_work(run: FaultRun) -> None:
    """SIGTERM to workers mid-step: they drain (finish, commit) and exit 0; nothing re-runs
    that had committed, nothing is lost."""
    ws = await run.spawn_ready(2)
    rids = [f"slow-0.5-{i:03d}" for i in range(40)]
    await run.start(rids)
    await run.wait_running(rids, n=4)  # mid-step
    for w in ws:
        w.signal(signal.SIGTERM)
        run.faults += 1
    run.spawn()
    for w in ws:
        assert await w.wait_exit(within=30) == 0, w.tail()
    run.fault_end = time.monotonic()
    await run.finish(rids)


@pytest.mark.slow
async def test_kill9_soak(run: FaultRun) -> None:
    """The long version: 2,000 sagas (10,000 with SAGA_SOAK=1), a kill every ~0.6 s."""
    n = 10_000 if SOAK else 2_000
    await kill_continuously(run, n=n, kills=n // 40, seed=23, **NO_EXPIRY_CAP)
