"""The executor's periodic work: promoting due retries, trimming streams, pruning dead
consumers and retired sagas' index entries, releasing lapsed budget holds, and keeping
its offset to the server's clock."""

from __future__ import annotations

import contextlib
import os
import socket
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol

import anyio
import structlog
from redis.exceptions import ResponseError

from saga.lifecycle.archiver import Archiver
from saga.state import budget_holds, presence, retention, signals, streams
from saga.state.connection import TRANSIENT_ERRORS
from saga.state.machine import StateMachine
from saga.state.model import is_undo
from saga.worker.health import HealthState
from saga.worker.map_intake import promote_item_retries

log = structlog.get_logger("saga.worker")


class Named(Protocol):
    """A step as upkeep needs it: a ``StepSpec``, or a name the controller has of a type
    whose code it lacks."""

    @property
    def name(self) -> str: ...


class Upkeep:
    def __init__(
        self,
        sm: StateMachine,
        specs: Sequence[Named],
        worker: str,
        health: HealthState,
        health_address: str = "",
        *,
        sweep: bool = True,
        archive_dir: str = "",
    ) -> None:
        self.sm, self.specs, self.worker, self.health = sm, specs, worker, health
        self.sweep = sweep
        """Delete the sagas whose retention ended (SAGA_RETENTION_SWEEP)."""
        self.archiver: Archiver | None = None
        if archive_dir:  # SAGA_ARCHIVE_DIR: each batch archived before it is deleted
            self.archiver = Archiver(sm.client, sm.keys, archive_dir)
        self.keys, self.client = sm.keys, sm.client
        self.clock_offset_ms = 0
        self.promoted: dict[str, int] = {}
        """Retries promoted by this process, per step (the controller's metrics read it)."""
        self.holds_lapsed = 0
        self.timers_in_promote = True
        """promote_once also fires due timers (the controller); a worker runs its own
        timers loop instead (saga.worker.timers), which sleeps until the earliest is due."""
        """Budget holds this process released because their attempt was gone."""
        self.holds_lapsed_usd = 0.0
        self.presence = presence.Presence(
            worker=worker,
            saga_type=self.keys.saga_type,
            # The steps it was asked to serve; each one's undo (undo:<step>) goes with it.
            steps=tuple(s.name for s in specs if not is_undo(s.name)),
            host=socket.gethostname(),
            pid=os.getpid(),
            health=health_address,
            started_ms=int(time.time() * 1000),
        )

    async def every(self, name: str, interval: float, fn: Callable[[], Awaitable[object]]) -> None:
        """Run ``fn`` every ``interval`` seconds until cancelled; Redis outages are waited out."""
        while True:
            self.health.tick(name)
            try:
                await fn()
            except TRANSIENT_ERRORS as exc:
                self.health.redis_down(exc)
            except ResponseError as exc:
                if not streams.group_missing(exc):
                    raise
                # The read loops recreate the groups; this pass just waits for them.
                log.debug("upkeep_skipped", loop=name, error="NOGROUP")
            # Waiting is not being stuck: tick while asleep (an interval may exceed the
            # liveness window); only a call that hangs stops the ticks.
            end = time.monotonic() + interval
            while (left := end - time.monotonic()) > 0:
                await anyio.sleep(min(left, self.health.stuck_after_s / 4))
                self.health.tick(name)

    async def promote_once(self) -> int:
        """Move due retries back to their ready streams (due by the server's clock); returns
        how many this call promoted (the script re-checks each: racing callers never
        promote one twice)."""
        now = time.time() * 1000 + self.clock_offset_ms
        total = 0
        for spec in self.specs:
            for p in self.keys.all_partitions():
                cands = await self.sm.due_candidates(spec.name, p, 100)
                due = [rid for rid, at in cands if at <= now + 50]
                if due:
                    promoted, _ = await self.sm.promote(spec.name, p, due)
                    if promoted:
                        log.debug("retries_promoted", step=spec.name, count=promoted)
                        self.promoted[spec.name] = self.promoted.get(spec.name, 0) + promoted
                    total += promoted
        total += await promote_item_retries(self.sm)  # maps' items
        await self.release_once()
        if self.timers_in_promote:
            await self.time_out_waits(int(now) + 50)
        return total

    async def time_out_waits(self, now_ms: int) -> int:
        """Take the declared path of every wait whose timer is due (a timeout, a sleep's
        end): a partition's due ones in one round trip; the script re-checks each against
        the server's clock. Returns how many moved."""
        moved = 0
        for p in self.keys.all_partitions():
            paths = await signals.time_out_due(self.sm, p, now_ms)
            done = sum(n for path, n in paths.items() if path not in ("not_due", "gone"))
            if done:
                log.info("waits_timed_out", partition=p, paths=paths)
            moved += done
        return moved

    async def release_once(self) -> int:
        """Send entries deferred by the per-user cap back to their streams as their users'
        slots allow (expired leases, a raised cap); every one when the step has no cap
        here (the cap was turned off). Returns how many went."""
        total = 0
        for spec in self.specs:
            cap, lease_ms = self.sm.user_caps.get(spec.name, (0, 0))
            for p in self.keys.all_partitions():
                total += await self.sm.release_deferred(
                    spec.name, p, cap=cap, lease_ms=lease_ms, most=1000, idle=False
                )
                # Entries lowered for urgent sagas, when none waits or past the age bound
                # (claims do it too; this covers a stream that went quiet).
                total += await self.sm.release_lowered(spec.name, p)
        return total

    async def maintain_once(self) -> None:
        await self.sync_clock()
        for spec in self.specs:
            for p in self.keys.all_partitions():
                await streams.trim_behind_readers(self.client, self.keys, spec.name, p)
                await streams.prune_consumers(
                    self.client, self.keys.ready(p, spec.name), keep=self.worker
                )
        for p in self.keys.all_partitions() if self.sweep else ():
            # A partition's sweep may run for seconds (retention.prune_retired): the pass
            # is alive, and /livez must see it across many partitions.
            self.health.tick("maintenance")
            pruned = await retention.prune_retired(self.sm, p, before_delete=self.archiver)
            if pruned:
                log.info("retired_sagas_pruned", partition=p, count=pruned)
            await self.lapse_holds(p)

    async def lapse_holds(self, partition: int) -> int:
        """Release the partition's budget holds of attempts gone (killed and not re-run,
        cancelled, retried in a new epoch): they no longer keep their user's budget."""
        lapsed = await budget_holds.lapse_holds(self.client, self.keys, partition)
        if lapsed.released:
            self.holds_lapsed += lapsed.released
            self.holds_lapsed_usd += lapsed.usd
            log.info("budget_holds_lapsed", partition=partition, count=lapsed.released,
                     usd=lapsed.usd)  # fmt: skip
        return lapsed.released

    async def announce_once(self) -> None:
        """Renew this worker's presence (what ``saga top`` counts as a live worker)."""
        now_ms = int(time.time() * 1000 + self.clock_offset_ms)
        await presence.announce(self.client, self.keys, self.presence, now_ms)

    async def withdraw(self) -> None:
        """Leave ``saga top`` at once on a clean stop (best effort: it expires anyway)."""
        with (
            anyio.CancelScope(shield=True),
            anyio.move_on_after(2),
            contextlib.suppress(*TRANSIENT_ERRORS, ResponseError),
        ):
            await presence.withdraw(self.client, self.keys, self.worker)

    async def sync_clock(self) -> None:
        secs, micros = await self.client.time()
        self.clock_offset_ms = int(secs * 1000 + micros // 1000 - time.time() * 1000)
