"""Claiming in the read: one claim_steps call that reads a step's new entries itself
and claims them, for a worker whose last read came back full (a backlog: nothing to
block for). It saves the XREADGROUP round trip before each batch's claim.

A lost reply cannot be re-sent as it is: the repeat would read the entries after the
ones the first call took. So the repeat reads back this consumer's own entries after
the newest it knew of (``XREADGROUP ... <id>``: its pending entries past that id, which
are what the lost call read) and claims them under the same op id, which the script
answers as duplicates of the lost call's claims.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from saga.state.backoff import resend
from saga.state.connection import TRANSIENT_ERRORS
from saga.state.keys import GROUP
from saga.state.replies import ClaimOutcome, claim_outcome, text
from saga.state.scripts import evalsha

if TYPE_CHECKING:
    from saga.state.machine import StateMachine

Entry = tuple[Any, Any]
"""An entry as XREADGROUP returns it: (id, fields)."""


async def claim_read(
    sm: StateMachine,
    step: str,
    partition: int,
    count: int,
    *,
    after: str,
    op: str,
    worker: str,
    lease_ms: int,
    max_lease_expiries: int,
    load_pages: bool = False,
    extra_fields: tuple[str, ...] = (),
    prev_step: str = "",
    user_cap: int = 0,
    undoable: Sequence[str] = (),
) -> tuple[list[ClaimOutcome], list[Entry]]:
    """Read up to ``count`` (≤100) new entries of ``step`` in ``partition`` and claim
    them in one call. Returns the claims, and the entries read but left to the caller
    (not the usual current-version entry: its own checks quarantine them or leave them
    for a newer release). ``after``: the newest entry id this consumer has read from the
    stream, which a lost reply's repeat reads back from."""
    if not 1 <= count <= 100:
        raise ValueError("claim_read reads 1 to 100 entries per call")
    keys, args = sm.claim_call(
        step, partition, worker=worker, lease_ms=lease_ms,
        max_lease_expiries=max_lease_expiries, load_pages=load_pages,
        extra_fields=extra_fields, prev_step=prev_step, user_cap=user_cap,
        undoable=undoable, op=op,
    )  # fmt: skip
    try:
        replies, left = await evalsha(
            sm.client, "claim_steps", keys, [*args, ">", count, sm.keys.record_base(partition)]
        )
    except TRANSIENT_ERRORS:
        left = await resend(lambda: _own_since(sm, step, partition, worker, after, count))
        return [], left  # the caller claims them under ``op``: the lost call's duplicates
    unseal = sm.keys.unseal if sm.keys.sealer is not None else None
    claims = [claim_outcome(r, step, extra_fields, unseal) for r in replies]
    return claims, [(text(i), dict(zip(f[::2], f[1::2], strict=True))) for i, f in left]


async def _own_since(
    sm: StateMachine, step: str, partition: int, worker: str, after: str, count: int
) -> list[Entry]:
    """This consumer's pending entries of the stream past ``after``: what a lost
    claim_read read (and, if it ran, claimed)."""
    reply = await sm.client.xreadgroup(
        GROUP, worker, {sm.keys.ready(partition, step): after}, count=count
    )
    return [(text(i), f) for _, entries in reply or [] for i, f in entries]
