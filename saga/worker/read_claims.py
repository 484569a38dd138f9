"""When a worker claims in the read (state/claim_read.py) instead of reading, then
claiming: a plain step of a one-partition keyspace off a cluster, whose last read of its
stream came back full, so another batch is waiting and nothing would block. An idle or
partly busy step reads the usual way, blocking, so an entry is handed over the moment it
is written. Also kept per step: the newest entry id this worker was given, from which
a lost claim-in-read's repeat reads its entries back."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import anyio
import structlog

from saga.api.pipeline import StepSpec
from saga.config.settings import Settings
from saga.state.claim_read import claim_read
from saga.state.connection import TRANSIENT_ERRORS
from saga.state.keys import Keys
from saga.state.machine import new_op
from saga.state.model import is_undo
from saga.worker.intake import claimable

if TYPE_CHECKING:
    from saga.worker.executor import Executor

log = structlog.get_logger("saga.worker")


class ReadClaims:
    def __init__(self, settings: Settings, keys: Keys) -> None:
        self.enabled = (
            settings.claim_in_read and not settings.cluster and len(keys.all_partitions()) == 1
        )
        self._full: dict[str, bool] = {}
        self._seen: dict[str, tuple[int, int]] = {}

    def use(self, spec: StepSpec) -> bool:
        """Claim in the read now: the step's last read was full (maps and undo steps
        claim through their own scripts, so always read)."""
        return (
            self.enabled
            and self._full.get(spec.name, False)
            and spec.map is None
            and not is_undo(spec.name)
        )

    def read(self, step: str, asked: int, got: int) -> None:
        """A read of ``step`` asked for ``asked`` entries and was given ``got``."""
        self._full[step] = got >= asked > 0

    def saw(self, step: str, ids: Iterable[str]) -> None:
        """Entry ids this worker was given (read, claimed in the read, or recovered)."""
        newest = self._seen.get(step, (0, 0))
        for entry_id in ids:
            ms, _, seq = entry_id.partition("-")
            newest = max(newest, (int(ms), int(seq or 0)))
        self._seen[step] = newest

    def after(self, step: str) -> str:
        ms, seq = self._seen.get(step, (0, 0))
        return f"{ms}-{seq}"


async def claim_in_read(ex: Executor, spec: StepSpec, reserved: int) -> int:
    """Read and claim up to ``reserved`` entries of the step in one call, start them,
    give back the slots not used; returns how many entries were read."""
    got, used, op = 0, 0, new_op()
    try:
        with anyio.CancelScope(shield=True), anyio.move_on_after(ex.drain_s):
            outcomes, left = await claim_read(
                ex.sm, spec.name, 0, reserved, after=ex.reads.after(spec.name), op=op,
                **claim_options(ex, spec),
            )  # fmt: skip
            ex.health.redis_up()
            got = len(outcomes) + len(left)
            ex.reads.saw(spec.name, [o.entry_id for o in outcomes])
            used = ex._started(spec, 0, outcomes)
            if left:  # unusual entries, or a lost reply's: the usual checks and claim
                ex.reads.saw(spec.name, [e[0] for e in left])
                pairs = await claimable(ex.sm, ex.observer, spec.name, 0, left, ex._inflight)
                pairs = pairs[-(reserved - used) :] if reserved > used else []
                if pairs:
                    again = await ex.sm.claim(spec.name, 0, pairs, op=op,
                                                **claim_options(ex, spec))  # fmt: skip
                    used += ex._started(spec, 0, again)
    except TRANSIENT_ERRORS as exc:  # as a plain read's claim: recovery takes them on
        ex.health.redis_down(exc)
        log.warning("claim_deferred", step=spec.name, error=type(exc).__name__)
    finally:
        ex.slots[spec.name].release(reserved - used)
    return got


def claim_options(ex: Executor, spec: StepSpec) -> dict[str, Any]:
    """What every claim of ``spec`` by this executor passes to claim_steps."""
    return {
        "worker": ex.worker,
        "lease_ms": int(spec.lease_s * 1000),
        "max_lease_expiries": spec.retry.max_lease_expiries,
        "load_pages": spec.loads_pages,
        "extra_fields": ex._extras[spec.name],
        "prev_step": ex._prev[spec.name],
        "user_cap": ex.sm.user_caps.get(spec.name, (0, 0))[0],
        "undoable": ex.undo.for_claim(spec.name),
    }
