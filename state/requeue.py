"""Requeueing idle entries for a process that runs no step (the controller).

``idle_pending`` finds ready entries delivered but idle past a threshold (their
worker died or was scaled away) with XPENDING, which makes no consumer; the
``requeue_idle`` script puts each back as a new entry (see its header). Both
are bounded: at most 100 entries per call.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from saga.state.codes import RC, to_code
from saga.state.keys import GROUP
from saga.state.machine import StateMachine, new_op
from saga.state.replies import text
from saga.state.scripts import evalsha

MAX_BATCH = 100


class IdleEntry(msgspec.Struct, frozen=True):
    entry_id: str
    fields: dict[bytes, bytes] | None
    """The entry's fields; None when it was deleted from the stream while pending."""


class RequeueOutcome(msgspec.Struct, frozen=True):
    code: RC
    entry_id: str
    detail: str = ""
    """The new entry id (OK, DUPLICATE), the saga's state (STALE_ENTRY) or lease holder."""


async def idle_pending(
    client: Any, ready: str, *, min_idle_ms: int, count: int = MAX_BATCH
) -> list[IdleEntry]:
    """Up to ``count`` entries of ``ready`` pending and idle for ``min_idle_ms``, oldest first."""
    rows = await client.xpending_range(
        ready, GROUP, "-", "+", min(count, MAX_BATCH), idle=min_idle_ms
    )
    ids = [text(r["message_id"]) for r in rows]
    if not ids:
        return []
    pipe = client.pipeline(transaction=False)
    for entry_id in ids:
        pipe.xrange(ready, entry_id, entry_id, count=1)
    found = await pipe.execute()
    return [
        IdleEntry(entry_id, dict(got[0][1]) if got else None)
        for entry_id, got in zip(ids, found, strict=True)
    ]


async def requeue_idle(
    sm: StateMachine,
    step: str,
    partition: int,
    entries: Sequence[tuple[str, str]],
    *,
    min_idle_ms: int,
    op: str | None = None,
) -> list[RequeueOutcome]:
    """Requeue (entry id, record id) pairs of one partition's ready stream, ≤100 per call."""
    if not entries:
        return []
    if len(entries) > MAX_BATCH:
        raise ValueError(f"at most {MAX_BATCH} entries per call, got {len(entries)}")
    k = sm.keys
    keys = [k.ready(partition, step), k.quarantine(partition)]
    # The cap's keys always (empty without a cap): a dropped entry's slot is freed even
    # when this process's settings do not know the workers' cap.
    keys += [k.inflight(partition, step), k.deferred(partition, step)]
    keys += [k.saga(record_id) for _, record_id in entries]
    args: list[Any] = [GROUP, min_idle_ms, op or new_op(), step]
    for entry_id, record_id in entries:
        args += [entry_id, record_id]
    replies = await sm._resend(lambda: evalsha(sm.client, "requeue_idle", keys, args))
    return [
        RequeueOutcome(to_code(r[0]), text(r[1]), text(r[2]) if len(r) > 2 else "") for r in replies
    ]
