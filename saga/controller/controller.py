"""The controller's loops: promote due retries, requeue idle entries, keep streams
trimmed, for every step of every registered saga type; each pass is bounded and
finished even when a drain starts.

Before every pass the partition guard is read again (one HMGET): a controller whose
SAGA_PARTITIONS no longer matches the keyspace (``saga partitions migrate`` ran, or is
running) would look for records in the wrong partitions and quarantine their entries,
so it stops instead, as a worker started then would refuse to run.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import anyio
import structlog
from redis.exceptions import ResponseError

from saga.api.pipeline import StepSpec
from saga.config.settings import Settings
from saga.controller.firing import Firing
from saga.controller.requeue import Requeuer
from saga.controller.types import TypeWork, leases_of, prepared, type_work, with_undos
from saga.state import partitions, streams
from saga.state.backoff import resending
from saga.state.connection import TRANSIENT_ERRORS
from saga.state.errors import PartitionCountError, SchemaVersionError
from saga.state.keys import Keys
from saga.state.scripts import ensure_loaded
from saga.state.types import registered_types
from saga.worker.health import HealthState
from saga.worker.upkeep import Upkeep

log = structlog.get_logger("saga.controller")

MAINTENANCE_S = 60.0
PASS_LIMIT_S = 30.0
"""A pass still running at SIGTERM gets this long to finish (each call is bounded)."""


class Controller:
    def __init__(
        self,
        *,
        client: Any,
        keys: Keys,
        settings: Settings,
        specs: Sequence[StepSpec],
        name: str,
        health: HealthState | None = None,
    ) -> None:
        """``keys`` and ``specs``: this deployment's own saga type (the others come from
        the registry of types); a step's compensation adds its undo step."""
        self.client, self.keys, self.settings, self.name = client, keys, settings, name
        self.specs = with_undos(specs)
        self.health = health or HealthState()
        self.own = type_work(client, keys, settings, self.specs, name, self.health)
        self.types: dict[str, TypeWork] = {keys.saga_type: self.own}
        self.refused: PartitionCountError | None = None
        self.stopping = anyio.Event()
        self._preparing = anyio.CancelScope()
        self._discovering = anyio.Lock()
        self._firing: Firing | None = None
        self.pipeline: Any = None
        """The own type's Pipeline (``serve`` sets it): its ``@app.schedule``s are
        registered at start, and its sagas start from schedules with no worker running."""

    @property
    def steps(self) -> list[str]:
        return [s.name for s in self.specs]

    @property
    def upkeep(self) -> Upkeep:
        """The own type's promoter and stream upkeep."""
        return self.own.upkeep

    @property
    def requeuer(self) -> Requeuer:
        return self.own.requeuer

    def stop(self) -> None:
        """Drain: finish the passes under way, start no new one, then return from run()."""
        if not self.stopping.is_set():
            log.info("controller_draining", controller=self.name)
            self.health.draining = True
            self.stopping.set()
            self._preparing.cancel()  # still waiting for Redis: nothing to finish

    async def run(self) -> None:
        """Run until stopped; raises PartitionCountError (after finishing the passes under
        way) if the keyspace's partition count is not SAGA_PARTITIONS, or changes."""
        with self._preparing:
            await self._prepare()
        if self.stopping.is_set():
            return
        log.info("controller_started", controller=self.name, types=sorted(self.types))
        s = self.settings
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._loop, "promote", s.promote_interval_s, self.promote_once)
            tg.start_soon(self._loop, "recover", s.recovery_interval_s, self.requeue_once)
            tg.start_soon(self._loop, "maintenance", MAINTENANCE_S, self.maintain_once)
            tg.start_soon(self._loop, "schedules", s.promote_interval_s, self.fire_schedules)
        log.info("controller_stopped", controller=self.name)
        if self.refused is not None:
            raise self.refused

    async def promote_once(self) -> int:
        return sum([await w.upkeep.promote_once() for w in await self.discover()])

    async def requeue_once(self) -> int:
        return sum([await w.requeuer.once() for w in await self.discover()])

    async def fire_schedules(self) -> int:
        """Start the sagas of the schedules whose tick has come (``saga.controller.firing``)."""
        if self._firing is None:
            self._firing = Firing(self.client, self.keys, self.settings, own=self.pipeline)
        return await self._firing.once(int(time.time() * 1000))

    async def maintain_once(self) -> None:
        for w in await self.discover():
            await w.upkeep.maintain_once()

    async def discover(self) -> list[TypeWork]:
        """Every registered type's work (new types' groups made first), the own type first.
        A type whose registered steps changed (a release added one, or a compensation)
        is rebuilt."""
        async with self._discovering:
            for info in await registered_types(self.client, self.keys):
                known = self.types.get(info.name)
                leases = leases_of(info, self.settings)
                steps = tuple(s.name for s in leases)
                if info.name == self.own.saga_type or (known and known.steps == steps):
                    continue
                keys = self.keys.of_type(info.name)
                work = type_work(self.client, keys, self.settings, leases, self.name, self.health)
                self.types[info.name] = await prepared(self.client, work)
                await work.upkeep.sync_clock()
                log.info("saga_type_found", saga_type=info.name, steps=list(steps))
            return list(self.types.values())

    async def _prepare(self) -> None:
        """Partition count checked, scripts loaded, every type's groups made at ID 0;
        retried until Redis answers."""

        async def prepare() -> None:
            await partitions.guard(self.client, self.keys)  # refuses a different count
            await ensure_loaded(self.client)
            self.health.scripts_loaded = True
            await streams.ensure_groups(self.client, self.keys, self.steps)
            await self.discover()
            if self.pipeline is not None and self.pipeline.schedules:
                from saga.controller.firing import register

                now, own = int(time.time() * 1000), self.pipeline
                await register(self.client, self.keys, own.name, own.schedules, now)
            self.health.groups_present = True
            await self.upkeep.sync_clock()

        await resending(attempts=None, on_retry=self.health.redis_down)(prepare)
        self.health.redis_up()

    async def _loop(self, name: str, interval: float, fn: Callable[[], Awaitable[object]]) -> None:
        while not self.stopping.is_set():
            self.health.tick(name)
            with anyio.CancelScope(shield=True), anyio.move_on_after(PASS_LIMIT_S):
                try:
                    await partitions.guard(self.client, self.keys)
                    await fn()
                    self.health.redis_up()
                except TRANSIENT_ERRORS as exc:
                    self.health.redis_down(exc)
                except PartitionCountError as exc:
                    self._refuse(exc)
                except ResponseError as exc:
                    if not streams.group_missing(exc):
                        raise
                    await self._regroup()
            await self._wait(name, interval)

    def _refuse(self, exc: PartitionCountError) -> None:
        if self.refused is None:
            # a schema refusal is its own event: an operator's alert on a partition
            # migration must not fire for an upgrade, nor the other way round
            event = (
                "schema_version_refused"
                if isinstance(exc, SchemaVersionError)
                else "partition_count_changed"
            )
            log.error(event, controller=self.name, error=str(exc))
            self.refused = exc
        self.stop()

    async def _regroup(self) -> None:
        """A group was destroyed (or Redis restarted empty): every type's, again at ID 0."""
        log.warning("consumer_group_missing", detail="recreating every type's groups at 0")
        with contextlib.suppress(*TRANSIENT_ERRORS):  # the next pass tries again
            for w in list(self.types.values()):
                await prepared(self.client, w)

    async def _wait(self, name: str, interval: float) -> None:
        """Sleep ``interval`` or until stopped, ticking: waiting is not being stuck."""
        end = time.monotonic() + interval
        while not self.stopping.is_set() and (left := end - time.monotonic()) > 0:
            with anyio.move_on_after(min(left, self.health.stuck_after_s / 4)):
                await self.stopping.wait()
            self.health.tick(name)
