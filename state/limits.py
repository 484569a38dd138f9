"""Bounds the state machine applies to what it stores."""

from __future__ import annotations

import functools
from typing import Any

import msgspec

DAY_S = 86_400
KEPT = -1
"""A retention of ``KEPT``: the saga is kept until an operator purges it."""


class Retention(msgspec.Struct, frozen=True, kw_only=True):
    """How long a saga is kept once it ends, per terminal state, in seconds (``KEPT``: until
    purged). The transition that ends a saga writes its 'ret' (the end of its retention) and
    its member in the partition's retired set; the sweep (``state/retention.py``) deletes it
    with everything it owns once 'ret' has passed. ``SAGA_RETENTION_DAYS`` sets them."""

    completed_s: int = 7 * DAY_S
    failed_s: int = 30 * DAY_S
    """Dead-lettered: kept longer than a success, for the operator who replays it."""
    cancelled_s: int = 30 * DAY_S
    compensated_s: int = 30 * DAY_S
    compensation_failed_s: int = 90 * DAY_S
    """A compensation that failed may have left a side effect standing: kept longest."""
    needs_review_s: int = 90 * DAY_S
    """Completed with a result flagged for a person's review, not yet accepted (once
    accepted, the completed retention runs from the acceptance)."""

    def arg(self) -> str:
        """The table every terminal script receives (``includes/retire.lua``)."""
        return _arg(self)

    def table(self) -> dict[str, int]:
        """State (``needs_review`` for a flagged completed saga) -> seconds."""
        return {f.removesuffix("_s"): getattr(self, f) for f in self.__struct_fields__}


@functools.lru_cache(maxsize=16)
def _arg(r: Retention) -> str:
    return ",".join(f"{state}={secs}" for state, secs in r.table().items())


class StateLimits(msgspec.Struct, frozen=True, kw_only=True):
    history_maxlen: int = 10_000
    """History events kept per record (approximate cap; a saga rarely needs 50)."""
    pages_ttl_s: int = 3600
    """How long the pages blob lives if the parser never commits."""
    retention: Retention = Retention()
    """How long an ended saga's hash, history and dead letter are kept, per state."""
    commit_replicas: int = 0
    """``SAGA_COMMIT_DURABILITY=replica`` sets 1: a start, and each batch of commits and
    fails, is acknowledged only once this many replicas have it (one ``WAIT`` per batch
    and node, in the same round trip). 0 (``local``): the primary's word is enough."""
    commit_fsync: bool = False
    """``SAGA_COMMIT_DURABILITY=fsync`` (or ``fsync+replica``): a start, and each batch of
    commits and fails, is acknowledged only once the primary's AOF has it on disk (and
    ``commit_replicas`` replicas' AOFs too): one ``WAITAOF 1 <commit_replicas> <wait>``
    per batch and node, in the same round trip, in place of the ``WAIT``. Without it an
    acknowledged write can vanish in a host crash (``appendfsync everysec`` fsyncs once
    a second)."""
    replica_wait_ms: int = 1000
    """``SAGA_COMMIT_WAIT_MS``: how long that ``WAIT`` (or ``WAITAOF``) waits before the
    call counts as failed (``NotReplicatedError``) and is re-sent with its operation ids."""
    priority_boost_ms: int = 60_000
    """``SAGA_PRIORITY_AGE_BOOST`` (s): while a saga with a priority above 0 waits at a step,
    claims set aside priority-0 entries of sagas younger than this; an older one is
    claimed in its turn (the bound on how long priorities hold it back). 0: off."""

    @property
    def durable(self) -> dict[str, Any]:
        """The keyword arguments of ``evalsha_many`` that make a call wait as configured
        ({} for ``local``: the call is as it was without the setting)."""
        if not (self.commit_replicas or self.commit_fsync):
            return {}
        return {
            "replicas": self.commit_replicas,
            "fsync": self.commit_fsync,
            "wait_ms": self.replica_wait_ms,
        }

    @property
    def retention_s(self) -> int:
        """A completed saga's retention (the one setting before states had their own)."""
        return self.retention.completed_s
