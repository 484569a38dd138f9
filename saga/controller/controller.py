"""The controller's loops: promote due retries, requeue idle entries, keep streams
trimmed, for every step; each pass is bounded and finished even when a drain starts."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import anyio
import structlog

from saga.controller.requeue import Requeuer
from saga.pipeline import StepSpec
from saga.settings import Settings
from saga.state import streams
from saga.state.backoff import resending
from saga.state.connection import TRANSIENT_ERRORS
from saga.state.keys import Keys
from saga.state.machine import StateMachine
from saga.state.scripts import ensure_loaded
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
        self.client, self.keys, self.settings, self.name = client, keys, settings, name
        self.specs = list(specs)
        self.sm = StateMachine(client, keys, settings.limits)
        self.health = health or HealthState()
        self.upkeep = Upkeep(self.sm, self.specs, name, self.health)
        self.requeuer = Requeuer(self.sm, self.specs, settings.recovery_interval_s)
        self.stopping = anyio.Event()
        self._preparing = anyio.CancelScope()

    @property
    def steps(self) -> list[str]:
        return [s.name for s in self.specs]

    def stop(self) -> None:
        """Drain: finish the passes under way, start no new one, then return from run()."""
        if not self.stopping.is_set():
            log.info("controller_draining", controller=self.name)
            self.health.draining = True
            self.stopping.set()
            self._preparing.cancel()  # still waiting for Redis: nothing to finish

    async def run(self) -> None:
        with self._preparing:
            await self._prepare()
        if self.stopping.is_set():
            return
        log.info("controller_started", controller=self.name, steps=self.steps)
        s, up = self.settings, self.upkeep
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._loop, "promote", s.promote_interval_s, up.promote_once)
            tg.start_soon(self._loop, "recover", s.recovery_interval_s, self.requeuer.once)
            tg.start_soon(self._loop, "maintenance", MAINTENANCE_S, up.maintain_once)
        log.info("controller_stopped", controller=self.name)

    async def _prepare(self) -> None:
        """Scripts loaded, every step's groups made at ID 0; retried until Redis answers."""

        async def prepare() -> None:
            await ensure_loaded(self.client)
            self.health.scripts_loaded = True
            await streams.ensure_groups(self.client, self.keys, self.steps)
            self.health.groups_present = True
            await self.upkeep.sync_clock()

        await resending(attempts=None, on_retry=self.health.redis_down)(prepare)
        self.health.redis_up()

    async def _loop(self, name: str, interval: float, fn: Callable[[], Awaitable[object]]) -> None:
        while not self.stopping.is_set():
            self.health.tick(name)
            with anyio.CancelScope(shield=True), anyio.move_on_after(PASS_LIMIT_S):
                try:
                    await fn()
                    self.health.redis_up()
                except TRANSIENT_ERRORS as exc:
                    self.health.redis_down(exc)
            await self._wait(name, interval)

    async def _wait(self, name: str, interval: float) -> None:
        """Sleep ``interval`` or until stopped, ticking: waiting is not being stuck."""
        end = time.monotonic() + interval
        while not self.stopping.is_set() and (left := end - time.monotonic()) > 0:
            with anyio.move_on_after(min(left, self.health.stuck_after_s / 4)):
                await self.stopping.wait()
            self.health.tick(name)
