"""Workers against their own environment: SCRIPT FLUSH every 50 ms (a failover or an
operator's flush, again and again), SIGTERM while Redis is unreachable at start-up, and
kill -9 of the worker holding a saga on its last allowed attempt."""

from __future__ import annotations

import signal
import threading
import time

import pytest
import redis

from tests.executor.support import Worker, free_port, states, status, wait_claimed, wait_until
from tests.faults.harness import TERMINAL, FaultRun
from tests.faults.proxy import Faults, Proxy
from tests.faults.runlog import RunLog


def run_log(run: FaultRun) -> RunLog:
    return RunLog.read(run.runlog)


pytestmark = pytest.mark.anyio


def flush_scripts(url: str, stop: threading.Event, every: float, counts: list[int]) -> None:
    client = redis.Redis.from_url(url)
    try:
        while not stop.wait(every):
            client.script_flush()
            counts[0] += 1
    finally:
        client.close()


async def test_script_flush_storm(run: FaultRun) -> None:
    """SCRIPT FLUSH every 50 ms for 4 s under 120 sagas: every worker stays up (NOSCRIPT
    is reloaded however often it comes) and every saga completes once."""
    await run.spawn_ready(3)
    rids = [f"slow-0.2-{i:03d}" for i in range(120)]
    stop, counts = threading.Event(), [0]
    flusher = threading.Thread(target=flush_scripts, args=(run.server.url, stop, 0.05, counts))
    flusher.start()
    try:
        await run.start(rids)

        async def stormed() -> bool:  # the storm ran while a third of the sagas committed
            ended = [s for s in await states(run.redis, run.keys, rids) if s in TERMINAL]
            return counts[0] >= 40 and len(ended) >= len(rids) // 3

        await wait_until(stormed, within=60, what="40 flushes and a third of the sagas done")
    finally:
        stop.set()
        flusher.join()
    run.faults = counts[0]
    run.fault_end = time.monotonic()
    await run.finish(rids)
    assert all(w.alive() for w in run.workers)


async def test_sigterm_during_startup(run: FaultRun) -> None:
    """A worker started while Redis is unreachable (refused, or a blackhole that never
    answers) stops on SIGTERM and on SIGINT (as at a terminal) within seconds, instead of
    retrying its start-up forever."""
    refused = f"redis://127.0.0.1:{free_port()}/0"
    hole = Proxy(target_port=run.server.port, faults=Faults(blackhole=True)).start()
    blackhole = f"redis://127.0.0.1:{hole.port}/0"
    cases = [(refused, signal.SIGTERM), (blackhole, signal.SIGTERM), (blackhole, signal.SIGINT)]
    for url, sig in cases:
        run.url = url
        w = run.spawn(SAGA_REDIS_TIMEOUT="2")

        async def serving(w: Worker = w) -> bool:  # wired, signals handled, in its start-up
            assert w.alive(), w.tail()
            return await status(w.port, "/livez") != 0

        await wait_until(serving, within=30, what="the worker to serve /livez")

        async def retrying(w: Worker = w) -> bool:  # its start-up has failed once at least
            return "waiting_for_redis" in w.log.read_text()

        await wait_until(retrying, within=30, what="the worker to retry its start-up")
        w.signal(sig)
        run.faults += 1
        started = time.monotonic()
        await w.wait_exit(within=10)
        assert time.monotonic() - started < 10
        assert "Traceback" not in w.log.read_text(), w.tail()
    hole.stop()


async def test_kill9_on_the_last_attempt(run: FaultRun) -> None:
    """Max attempts 2: the worker running a healthy saga is killed mid-step twice; the saga
    still completes (a lease lost to a crash is not the record's failure)."""
    env = {"SAGA_ROUTER_MAX_ATTEMPTS": "2"}
    workers = await run.spawn_ready(3, **env)
    rid = "slow-1.5-last"
    await run.start([rid])
    for k in range(2):

        async def running(k: int = k) -> bool:  # the attempt has begun its step
            return run_log(run).runs[("router", rid, 1)] > k

        await wait_until(running, within=30, what=f"attempt {k + 1} to begin")
        victim = await wait_claimed(run.redis, run.keys, rid, [w for w in workers if w.alive()])
        run.kill(victim)
        workers.append(run.spawn(**env))
    run.fault_end = time.monotonic()
    await run.finish([rid], within=60)
