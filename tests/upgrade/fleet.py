"""A rolling upgrade under load, on the fault harness (tests/faults/harness.py): workers of
a previous release (its own venv, ``release_venv``) serve the fault pipeline, workers of
this one join, each old worker is killed with -9 while it holds a step and replaced by a
new one (a Deployment's rollout with a crash in it), then this release's ``saga migrate``
runs if the schema changed, under load. The run ends with the fault suite's invariants:
0 lost, 0 double commits, 0 stuck.
"""

from __future__ import annotations

import json
import random
import sys
import time
from dataclasses import dataclass

import anyio

from saga.state import schema_version
from saga.state.replies import num, text
from tests.executor.pipelines import slow_seconds
from tests.executor.support import REPO, Worker, server_ms, wait_until
from tests.faults import runlog
from tests.faults.harness import FaultRun
from tests.faults.invariants import Tally
from tests.upgrade import release_procs
from tests.upgrade.release_venv import Release

SCHEMA = "state/schema_version.py"
MARGIN_MS = 120


@dataclass(frozen=True)
class Plan:
    old_workers: int
    """Workers of the previous release at the start; each is killed and replaced."""
    rate: float
    """Sagas started a second, from before the new workers join to after the migration."""
    settle_s: float = 2.0
    """Seconds of load on the new release alone, after the migration."""
    seed: int = 7


class Feeder:
    """Starts sagas at a steady rate while the upgrade goes on (the load): slow ones
    (0.2-0.6 s at the router) and quick ones, every id kept for the final check."""

    def __init__(self, run: FaultRun, plan: Plan) -> None:
        self.run, self.plan = run, plan
        self.rids: list[str] = []
        self._rng = random.Random(plan.seed)
        self._count = 0
        self._stop = anyio.Event()

    async def feed(self) -> None:
        every = 0.25
        per_tick = max(1, round(self.plan.rate * every))
        while not self._stop.is_set():
            wave = [self._next() for _ in range(per_tick)]
            await self.run.start(wave)
            self.rids += wave
            with anyio.move_on_after(every):
                await self._stop.wait()

    def _next(self) -> str:
        self._count += 1
        i = self._count
        return f"slow-0.{self._rng.randint(2, 6)}-{i:05d}" if i % 3 else f"k-{i:05d}"

    def stop(self) -> None:
        self._stop.set()


def spawn_release(run: FaultRun, release: Release, **overrides: str) -> Worker:
    """A ``saga worker`` of ``release`` (its venv's python, its own test modules) on the
    run's server and pipeline."""
    log = run.tmp / f"worker-{len(run.workers)}-{release.commit[:7]}.log"
    w = release_procs.start(release, ["worker", *runlog.STEPS], run.env(**overrides), log)
    run.workers.append(w)
    return w


async def wait_busy(run: FaultRun, w: Worker, rids: list[str], within: float = 60) -> None:
    """Until ``w`` holds a slow router step of one of ``rids`` with at least
    ``MARGIN_MS`` of it left (by the server's clock): a kill now lands mid-step, not in
    the last milliseconds while its commit is on the wire."""

    async def busy() -> bool:
        slow = [r for r in rids if r.startswith("slow-")]
        pipe = run.redis.pipeline(transaction=False)
        for rid in slow:
            pipe.hmget(run.keys.saga(rid), "state", "worker", "step", "claimed")
        rows = await pipe.execute()
        now = await server_ms(run.redis)
        return any(
            text(state) == "running"
            and text(step) == "router"
            and w.owns(text(name))
            and num(claimed) + slow_seconds(rid) * 1000 - now > MARGIN_MS
            for rid, (state, name, step, claimed) in zip(slow, rows, strict=True)
        )

    await wait_until(busy, within=within, what=f"worker {w.pid} mid-step", on_timeout=w.tail)


async def migrate(run: FaultRun) -> dict[str, object]:
    """This release's ``saga migrate --json`` on the run's keyspace."""
    done = await anyio.run_process(
        [sys.executable, "-m", "saga.cli.main", "migrate", "--json"],
        cwd=REPO,
        env=run.env(),
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()
    report: dict[str, object] = json.loads(done.stdout)
    return report


async def rolling_upgrade(run: FaultRun, old: Release, plan: Plan) -> Tally:
    """The whole upgrade; returns the invariants' tally (the summary row is reported)."""
    new_schema, old_schema = schema_version.CURRENT, old.constant(SCHEMA, "CURRENT")
    assert old_schema >= schema_version.OLDEST_RUNNABLE, (
        f"this release runs on schema {schema_version.OLDEST_RUNNABLE}+, the previous one "
        f"writes {old_schema}: no rolling upgrade, drain and migrate first (operations.md)"
    )
    olds = [spawn_release(run, old) for _ in range(plan.old_workers)]
    for w in olds:  # the old release makes the keyspace: its schema version is recorded
        await w.wait_ready(within=120)
    feeder = Feeder(run, plan)
    async with anyio.create_task_group() as tg:
        tg.start_soon(feeder.feed)
        await run.spawn_ready(plan.old_workers)  # the new release joins
        for w in olds:  # one at a time, as a Deployment's rollout: the next once it is up
            await wait_busy(run, w, feeder.rids)
            run.kill(w)  # kill -9 mid-step: its attempt is reclaimed by a live worker
            await run.spawn().wait_ready(within=120)  # the replacement: this release
        if old_schema != new_schema:
            report = await migrate(run)
            assert report["to_version"] == new_schema, report
        await anyio.sleep(plan.settle_s)  # load on the new release alone
        feeder.stop()
    run.extra["old_release"] = old.commit[:7]
    run.extra["schema"] = f"{old_schema}->{new_schema}"
    run.fault_end = time.monotonic()
    tally = await run.finish(feeder.rids, within=180)
    assert await schema_version.read_version(run.redis, run.keys) == new_schema
    assert tally.reclaimed >= plan.old_workers, "the kills did not land mid-step"
    _old_and_new_both_ran(run, olds)
    assert tally.executions >= 3 * tally.sagas
    return tally


def _old_and_new_both_ran(run: FaultRun, olds: list[Worker]) -> None:
    """Each old worker committed steps before it was killed, and so did the new ones."""
    ended = {p.stem: p.read_text().count(" end\n") for p in run.runlog.glob("*.log")}
    for w in olds:
        assert ended.get(str(w.pid), 0) > 0, f"old worker {w.pid} ran no step:\n{w.tail()}"
    new = [w for w in run.workers if w not in olds]
    assert sum(ended.get(str(w.pid), 0) for w in new) > 0, "no new worker ran a step"
