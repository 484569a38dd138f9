"""Bad ready entries: thousands of malformed ones, entries of a newer release during a
rolling upgrade (left for newer workers, never quarantined), and a saga whose own entry
is malformed (dead-lettered, visible, not pending forever)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import anyio
import pytest

from saga.state.model import SagaState
from saga.state.replies import text
from tests.executor.support import (
    REPO,
    Worker,
    free_port,
    pending_entries,
    states,
    wait_until,
)
from tests.faults.harness import FaultRun, read_metrics

pytestmark = pytest.mark.anyio


async def test_malformed_entries_in_bulk(run: FaultRun) -> None:
    """1,000 malformed entries among 100 sagas: each quarantined once, every saga completes."""
    ready = run.keys.ready(0, "router")
    bad = [{b"junk": str(i).encode()} if i % 2 else {b"rid": b"x", b"v": b"1"} for i in range(1000)]
    pipe = run.redis.pipeline(transaction=False)
    for fields in bad:
        pipe.xadd(ready, fields)
    await pipe.execute()
    rids = [f"m-{i:03d}" for i in range(100)]
    await run.start(rids)
    await run.spawn_ready(2)
    run.faults = len(bad)
    await run.finish(rids)
    rows = await run.redis.xrange(run.keys.quarantine(0))
    assert len({text(f[b"entry"]) for _, f in rows}) == len(rows) == len(bad)


async def replace_entry(run: FaultRun, rid: str, fields: dict[bytes, bytes]) -> None:
    """Make ``fields`` the saga's current ready entry, as another release would have."""
    saga = run.keys.saga(rid)
    ready = run.keys.ready(0, "router")
    await run.redis.xdel(ready, text(await run.redis.hget(saga, "entry")))
    entry = await run.redis.xadd(ready, fields)
    await run.redis.hset(saga, "entry", entry)
    run.poller.forget_lost(since=0.0)  # the replaced entry is no double enqueue


def spawn_newer(run: FaultRun) -> Worker:
    port = free_port()
    log = run.tmp / f"worker-newer-{len(run.workers)}.log"
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.faults.newer_worker",
                "worker",
                *("router", "parser", "grouper"),
            ],
            cwd=REPO,
            env={**run.env(), "SAGA_HEALTH_PORT": str(port)},
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
        )
    w = Worker(proc, port, log, ["router", "parser", "grouper"])
    run.workers.append(w)
    return w


async def test_entries_of_a_newer_release_wait_for_newer_workers(run: FaultRun) -> None:
    """v=2 entries under v=1 workers: left pending (not quarantined), the sagas visible as
    pending; a newer worker joins and completes them all (defect 6)."""
    rids = [f"v2-{i:02d}" for i in range(10)]
    await run.start(rids)
    for rid in rids:
        await replace_entry(run, rid, {b"rid": rid.encode(), b"ep": b"1", b"v": b"2"})
    run.faults = len(rids)
    old = await run.spawn_ready(2)
    ready = run.keys.ready(0, "router")

    async def seen_twice() -> bool:  # past the lease and recovery: each read again
        rows = await pending_entries(run.redis, ready)
        return len(rows) == len(rids) and all(r["n"] >= 2 for r in rows)

    await wait_until(seen_twice, within=30, what="old workers reading the v=2 entries again")
    assert await run.redis.xlen(run.keys.quarantine(0)) == 0
    assert set(await states(run.redis, run.keys, rids)) == {"pending"}
    assert len(await pending_entries(run.redis, run.keys.ready(0, "router"))) == len(rids)
    assert any(w.logged("entry_left_for_newer_release") for w in old)
    shown = [await anyio.to_thread.run_sync(read_metrics, w.port) for w in old]
    assert any(
        'saga_steps_left_for_newer_release_total{saga_type="documents",step="router"}' in m
        for m in shown
    )
    newer = spawn_newer(run)
    await newer.wait_ready(within=120)
    for w in old:  # the rolling upgrade goes on: old pods stop, their pending entries
        w.signal(signal.SIGTERM)  # go to the newer worker once idle past the lease
        assert await w.wait_exit(within=30) == 0
    run.fault_end = time.monotonic()
    await run.finish(rids, within=60)


async def test_saga_whose_entry_is_quarantined_is_dead_lettered(run: FaultRun) -> None:
    """A saga's own entry malformed (epoch not a number): it is dead-lettered with the
    reason, in the dead letters, instead of pending forever; the others complete."""
    rids = [f"q-{i:02d}" for i in range(20)]
    await run.start(rids)
    await replace_entry(run, "q-00", {b"rid": b"q-00", b"ep": b"one", b"v": b"1"})
    run.faults = 1
    await run.spawn_ready(1)
    await run.finish(rids, want={"q-00": SagaState.FAILED})
    ec, em = await run.redis.hmget(run.keys.saga("q-00"), "ec", "em")
    assert text(ec) == "Quarantined" and "epoch 'one' is not a number" in text(em)
    assert await run.redis.xlen(run.keys.dead(0, "router")) == 1
