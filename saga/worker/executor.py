"""The executor: reads its steps' streams in batches, claims a batch per script
call, runs up to ``concurrency`` attempts per step, recovers idle entries,
promotes due retries, keeps the streams trimmed, and drains on SIGTERM."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from typing import Any

import anyio
import structlog
from redis.exceptions import ResponseError

from saga.api.pipeline import Pipeline, StepSpec
from saga.config.settings import Settings
from saga.state import recovery, streams
from saga.state.codes import RC
from saga.state.connection import TRANSIENT_ERRORS
from saga.state.keys import GROUP, Keys
from saga.state.machine import StateMachine
from saga.state.presence import PRESENCE_EVERY_S
from saga.state.replies import text
from saga.worker import startup, timers
from saga.worker.attempt import AttemptRunner
from saga.worker.committer import Committer
from saga.worker.fairness import release_idle, user_caps
from saga.worker.health import HealthState
from saga.worker.intake import claimable
from saga.worker.map_intake import claim_map_entries, map_plans
from saga.worker.observer import Observer
from saga.worker.partition_reads import PartitionReader
from saga.worker.ports import Ports
from saga.worker.read_claims import ReadClaims, claim_in_read, claim_options
from saga.worker.refusals import log_refused
from saga.worker.release_steps import claim_extras
from saga.worker.slots import Slots
from saga.worker.undo_handoff import UndoHandoff, previous_steps, with_undos
from saga.worker.upkeep import Upkeep
from saga.worker.warmup import warm_before_ready, warm_plan
from saga.worker.watchdog import Watchdog

log = structlog.get_logger("saga.worker")


class Executor:
    def __init__(
        self,
        *,
        client: Any,
        keys: Keys,
        settings: Settings,
        pipeline: Pipeline,
        steps: Sequence[str],
        ports: Ports,
        worker: str,
        observer: Observer | None = None,
        health: HealthState | None = None,
        on_ready: Callable[[], None] | None = None,
        health_address: str = "",
    ) -> None:
        keys = keys.of_type(pipeline.name)  # the pipeline's saga type owns the keys
        self.client, self.keys, self.settings = client, keys, settings
        self.on_ready = on_ready
        self.specs = with_undos([pipeline.get(s) for s in steps])
        self.type_info = pipeline.info()
        self._prev = previous_steps(pipeline, self.specs)
        self._extras = {s.name: claim_extras(s, self._prev, pipeline.versioned) for s in self.specs}
        self.worker = worker
        self.sm = StateMachine(client, keys, settings.limits)
        self.sm.user_caps = user_caps(settings, self.specs)
        self.sm.maps = map_plans(pipeline, self.specs)
        self.undo = UndoHandoff(pipeline.undoable())
        self.health = health or HealthState()
        self.observer = observer or Observer()
        self.committer = Committer(self.sm, self.health)
        self.watchdog = Watchdog()
        self.ports = ports
        self.runner = AttemptRunner(
            self.sm, pipeline, settings, self.committer, ports, worker, self.observer, self.watchdog
        )
        self.timers = timers.Timers()
        self.runner.on_timer = self.timers.poke  # a timer it parks wakes the timers loop
        self.slots = {s.name: Slots(s.concurrency) for s in self.specs}
        self.reads = ReadClaims(settings, keys)
        self.stopping = anyio.Event()
        self._inflight: set[tuple[str, int, str]] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._all_idle = anyio.Event()
        self.upkeep = Upkeep(
            self.sm,
            self.specs,
            worker,
            self.health,
            health_address,
            sweep=settings.retention_sweep,
            archive_dir=settings.archive_dir,
        )
        self.drain_s = drain_seconds(settings, self.specs)

    # -- lifecycle ------------------------------------------------------------
    async def run(self) -> None:
        """Run until ``stop()`` (SIGTERM/SIGINT: ``service.run_with_signals``), then drain.
        A stop while Redis is still unreachable at start-up returns at once."""
        if not await self._prepare():
            log.info(
                "worker_stopped",
                worker=self.worker,
                detail="stopped before Redis answered; nothing was claimed",
            )
            return
        plan = warm_plan(self.specs, self.ports)
        if not await warm_before_ready(plan, self.worker, self.health, self.stopping):
            log.info("worker_stopped", worker=self.worker, detail="stopped while warming up")
            return
        if self.on_ready is not None:
            self.on_ready()
        async with anyio.create_task_group() as outer:
            outer.start_soon(self.committer.run)
            outer.start_soon(self.watchdog.run)  # runs through the drain: heartbeats go on
            try:
                async with anyio.create_task_group() as loops:
                    for spec in self.specs:
                        loops.start_soon(self._read_loop, spec)
                    up = self.upkeep
                    loops.start_soon(
                        up.every, "promote", self.settings.promote_interval_s, up.promote_once
                    )
                    up.timers_in_promote = False  # its own loop, timely (worker/timers)
                    loops.start_soon(self.timers.run, up, self.settings.promote_interval_s)
                    loops.start_soon(up.every, "maintenance", 60.0, up.maintain_once)
                    loops.start_soon(up.every, "presence", PRESENCE_EVERY_S, up.announce_once)
                    await self.stopping.wait()
                    loops.cancel_scope.cancel()
                await self._drain()
            finally:
                await self._cancel_attempts()
                self.committer.close()
                self.watchdog.close()
                await self.upkeep.withdraw()
        log.info("worker_stopped", worker=self.worker)

    def stop(self, reason: str = "") -> None:
        """Drain and stop (``reason``: the signal's name, for the log)."""
        if not self.stopping.is_set():
            log.info(
                "worker_draining", worker=self.worker, inflight=len(self._inflight), signal=reason
            )
            self.health.draining = True
            self.stopping.set()

    async def _drain(self) -> None:
        """Let in-flight attempts finish within the grace period; the rest are then
        cancelled (``_cancel_attempts``), unacknowledged, so another executor reclaims them."""
        if self._inflight:
            with anyio.move_on_after(self.drain_s):
                while self._inflight:
                    self._all_idle = anyio.Event()
                    await self._all_idle.wait()
        if self._inflight:
            log.warning("drain_timeout", left_unacknowledged=len(self._inflight))

    async def _cancel_attempts(self) -> None:
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _prepare(self) -> bool:
        names = [s.name for s in self.specs]
        return await startup.prepare(
            self.client, self.keys, self.settings, self.health, self.upkeep,
            self.type_info, names, self.worker, self.stopping,
        )  # fmt: skip

    async def _regroup(self, spec: StepSpec) -> None:
        names = [s.name for s in self.specs]
        await startup.regroup(self.client, self.keys, self.health, names, spec.name)

    # -- reading and claiming ---------------------------------------------------
    async def _read_loop(self, spec: StepSpec) -> None:
        streams_of = {self.keys.ready(p, spec.name): p for p in self.keys.all_partitions()}
        groups = [dict.fromkeys(streams_of, ">")]
        # On a cluster one XREADGROUP cannot name two partitions' streams (two slots).
        reader = PartitionReader(self.client, self.worker, list(streams_of))
        delay, recover_at = 0.1, 0.0
        while True:
            try:
                recover_at = await self._read_once(spec, groups, streams_of, recover_at, reader)
                delay = 0.1
            except TRANSIENT_ERRORS as exc:
                self.health.redis_down(exc)
                await anyio.sleep(delay)
                delay = min(delay * 2, 1.0)
            except ResponseError as exc:
                if not streams.group_missing(exc):
                    raise
                try:
                    await self._regroup(spec)
                except TRANSIENT_ERRORS as down:
                    self.health.redis_down(down)
                await anyio.sleep(delay)  # never a tight loop, whatever the server says
                delay = min(delay * 2, 1.0)

    async def _read_once(
        self,
        spec: StepSpec,
        groups: list[dict[str, str]],
        streams_of: dict[str, int],
        recover_at: float,
        reader: PartitionReader,
    ) -> float:
        """One pass: recovery if due, then one blocking read per group of streams, whose
        entries are claimed and started. Returns when recovery is next due."""
        slots = self.slots[spec.name]
        self.health.tick(f"read:{spec.name}")
        await self._wait_capacity(slots, f"read:{spec.name}")
        if time.monotonic() >= recover_at:
            # Recovery runs here, between reads: a loop of its own would find every
            # free slot reserved by the blocking XREADGROUP below, and never run.
            recover_at = time.monotonic() + self.settings.recovery_interval_s
            try:
                await self._recover_once(spec)
            except TRANSIENT_ERRORS as exc:
                self.health.redis_down(exc)
        if self.reads.use(spec):
            n = slots.reserve(self.settings.read_batch)
            if n:
                got = await claim_in_read(self, spec, n)
                self.reads.read(spec.name, n, got)
                if spec.name in self.sm.user_caps and got < n:
                    await release_idle(self.sm, spec.name, n - got)
            return recover_at
        for group in groups:
            n = slots.reserve(self.settings.read_batch)
            if n == 0:
                break
            # An idle read wakes up for the next recovery pass: SAGA_RECOVERY_INTERVAL
            # holds even when it is shorter than SAGA_BLOCK_MS.
            until_recovery_ms = int((recover_at - time.monotonic()) * 1000)
            block = max(1, min(self.settings.block_ms, until_recovery_ms))
            try:
                if self.settings.cluster:
                    reply = await reader.read(n, block)
                else:
                    reply = await self.client.xreadgroup(
                        GROUP, self.worker, group, count=n, block=block
                    )
            except BaseException:
                slots.release(n)
                raise
            self.health.redis_up()
            self.reads.read(spec.name, n, _entries(reply))
            await self._claim_read(spec, reply, streams_of, n)
            if spec.name in self.sm.user_caps and _entries(reply) < n:
                await release_idle(self.sm, spec.name, n - _entries(reply))
        return recover_at

    async def _claim_read(
        self, spec: StepSpec, reply: Any, streams_of: dict[str, int], reserved: int
    ) -> None:
        """Claim and start what one read returned; give back the slots it did not use."""
        got = 0
        try:
            # What was read is claimed and started even if a SIGTERM comes now: the
            # drain then runs it, instead of leaving it pending until its lease
            # expires. Bounded by the drain period if Redis hangs.
            with anyio.CancelScope(shield=True), anyio.move_on_after(self.drain_s):
                for stream, entries in reply or []:
                    name = stream.decode() if isinstance(stream, bytes) else stream
                    got += await self._claim_and_run(spec, streams_of[name], entries)
        except TRANSIENT_ERRORS as exc:
            # Read but not claimed: the entries stay pending, and recovery re-runs them
            # once they are idle past the lease. Never a reason to crash.
            self.health.redis_down(exc)
            log.warning("claim_deferred", step=spec.name, error=type(exc).__name__)
        finally:
            self.slots[spec.name].release(reserved - got)

    def _claim_options(self, spec: StepSpec) -> dict[str, Any]:
        return claim_options(self, spec)

    async def _claim_and_run(self, spec: StepSpec, partition: int, entries: list[Any]) -> int:
        """Claim entries (already read) and start their attempts; returns slots used."""
        if spec.map is not None:  # a map's spawns and items (saga/worker/map_intake.py)
            got = await claim_map_entries(
                self.sm, self.observer, spec, partition, entries, self._inflight, self.worker
            )
            return self._started(spec, partition, got)
        pairs = await claimable(
            self.sm, self.observer, spec.name, partition, entries, self._inflight
        )
        used = 0
        for i in range(0, len(pairs), 100):
            outcomes = await self.sm.claim(
                spec.name, partition, pairs[i : i + 100], **self._claim_options(spec)
            )
            used += self._started(spec, partition, outcomes)
        return used

    def _started(self, spec: StepSpec, partition: int, outcomes: list[Any]) -> int:
        used = 0
        for out in outcomes:
            if out.code in (RC.OK, RC.DUPLICATE) and out.claim:
                used += 1
                self._start(spec, partition, out.claim)
            elif out.code not in (RC.OK, RC.DUPLICATE):
                log_refused(spec.name, out.code, out.entry_id, out.record_id, out.detail)
        self.observer.claimed(spec.name, used)
        return used

    def _start(self, spec: StepSpec, partition: int, claim: Any) -> None:
        # Entry ids are per stream: two steps' streams can hold the same id.
        key = (spec.name, partition, claim.entry_id)
        self._inflight.add(key)

        # A bare asyncio task, not an anyio task group's: spawning through the group
        # cost ~25 µs an attempt (saga bench profile). Drains cancel these by hand.
        task = asyncio.get_running_loop().create_task(self._attempt(spec, claim, key))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _attempt(self, spec: StepSpec, claim: Any, key: tuple[str, int, str]) -> None:
        try:
            await self.runner.run(spec, claim)
        except TRANSIENT_ERRORS as exc:  # the step stays pending: recovery re-runs it
            log.warning("attempt_abandoned", record_id=claim.record_id, error=type(exc).__name__)
        except Exception:
            # A defect in the engine or an adapter, not the step (the step's errors
            # are failures it records). The entry stays pending; recovery re-runs it
            # after the lease, and a record that keeps crashing is dead-lettered.
            log.exception("attempt_crashed", record_id=claim.record_id, step=spec.name)
        finally:
            self._inflight.discard(key)
            self.slots[spec.name].release(1)
            if not self._inflight:
                self._all_idle.set()

    # -- waiting and recovering ---------------------------------------------------
    async def _wait_capacity(self, slots: Slots, name: str) -> None:
        """Wait for a free slot; a loop waiting on its own running steps is busy, not stuck."""
        while slots.used >= slots.size:
            with anyio.move_on_after(self.health.stuck_after_s / 4):
                await slots.wait_free()
            self.health.tick(name)

    async def _recover_once(self, spec: StepSpec) -> None:
        """Take over entries of ``spec`` idle past the lease (their worker died), re-run them."""
        slots = self.slots[spec.name]
        for p in self.keys.all_partitions():
            n = slots.reserve(50)
            if n == 0:
                break
            got = 0
            try:
                rec = await recovery.recover_idle(
                    self.sm,
                    spec.name,
                    p,
                    worker=self.worker,
                    min_idle_ms=int(spec.lease_s * 1000) + 1000,
                    count=n,
                )
                for lost in rec.deleted:
                    log.error("entry_lost", step=spec.name, entry=lost, partition=p)
                if rec.entries:
                    log.info("entries_recovered", step=spec.name, count=len(rec.entries))
                    self.reads.saw(spec.name, [text(e[0]) for e in rec.entries])
                    got = await self._claim_and_run(spec, p, rec.entries)
            finally:
                slots.release(n - got)


def _entries(reply: Any) -> int:
    return sum(len(entries) for _, entries in reply or [])


def drain_seconds(settings: Settings, specs: Sequence[StepSpec]) -> float:
    """``SAGA_DRAIN_SECONDS``, or by default the longest timeout of ``specs``: an attempt
    that started just before SIGTERM may run that long, and cutting it off would pay for
    it twice (the LLM call is repeated by whoever reclaims it)."""
    if settings.drain_s is not None:
        return settings.drain_s
    return max((s.timeout_s for s in specs), default=30.0)
