"""A person's review of a flagged step, decision by decision (``decide_review.lua``).

The decisions are opaque here: the caller (``saga.documents.review``) builds them from the
step's output and the decisions read with it, and passes the version it read; the
script refuses the write when another decision changed the review in between, so two
reviewers of one saga never overwrite each other silently. Values may be patient
data: the decisions, the event's copy of the decision and the reviewed output are
sealed under ``SAGA_DATA_KEY`` like outputs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from saga.state.codes import RC, raise_for, to_code
from saga.state.errors import SagaNotFoundError, StepConflictError
from saga.state.ids import validate_id, validate_step
from saga.state.keys import Keys
from saga.state.machine import StateMachine, new_op
from saga.state.replies import num, text
from saga.state.scripts import evalsha


class ReviewRead(msgspec.Struct, frozen=True, kw_only=True):
    """What a review decision is built from, read in one round trip."""

    version: int
    """The review's version (``rvv``): pass it back to ``decide``."""
    flagged: str
    """The step's review reason (``rv:<step>``); "" once the review is complete."""
    output: bytes
    """The step's output (opened): the machine's, or the reviewed one once complete."""
    original: bytes
    """The machine's output kept at completion (``orig:<step>``); b"" before."""
    decisions: bytes
    """Every decision so far (``rvd:<step>``, opened); b"" before the first."""
    state: str
    epoch: int


class Decided(msgspec.Struct, frozen=True, kw_only=True):
    version: int
    epoch: int
    entry: str
    """The ready entry of the step that re-runs; "" unless the decision completed it."""
    duplicate: bool = False

    @property
    def completed(self) -> bool:
        return bool(self.entry)


class Decision(msgspec.Struct, frozen=True, kw_only=True):
    """One call's arguments, all already encoded by the caller."""

    step: str
    version: int
    summary: str
    """For history, no values in it: ``correct b3``."""
    decisions: bytes
    event: bytes
    complete: bool = False
    reviewed: bytes = b""
    next_step: str = ""
    rerun: Sequence[str] = ()
    """The steps that re-run (from ``next_step`` on): their flags are cleared."""
    kept: Sequence[str] = ()
    """The other steps of the pipeline: the record stays flagged while one of them is."""


async def read_review(client: Any, keys: Keys, record_id: str, step: str) -> ReviewRead:
    validate_id(record_id)
    validate_step(step)
    fields = ("state", "epoch", "rvv", f"rv:{step}", f"out:{step}", f"orig:{step}")
    got = await client.hmget(keys.saga(record_id), [*fields, f"rvd:{step}"])
    if got[0] is None:
        raise SagaNotFoundError(f"no saga exists for record {record_id!r}")
    return ReviewRead(
        version=num(got[2]),
        flagged=text(got[3]),
        output=keys.unseal(got[4] or b""),
        original=keys.unseal(got[5] or b""),
        decisions=keys.unseal(got[6] or b""),
        state=text(got[0]),
        epoch=num(got[1]),
    )


def open_event(keys: Keys, value: str) -> str:
    """A history event's decision as JSON (opened when sealed)."""
    if keys.sealer is None:
        return value
    return keys.sealer.unseal_text(value)


async def decide(
    sm: StateMachine, record_id: str, d: Decision, *, actor: str, op: str | None = None
) -> Decided:
    """Record one decision; raises ReviewConflictError when the version moved."""
    validate_id(record_id)
    validate_step(d.step)
    steps = [validate_step(s) for s in [*d.rerun, *d.kept]]
    if len(steps) > 32:
        raise ValueError("at most 32 steps")
    op = op or new_op()
    k, p = sm.keys, sm.keys.partition_of(record_id)
    ready = k.ready(p, d.next_step or d.step)
    keys = [k.saga(record_id), k.history(record_id), k.review_index(p), ready]
    keys += [*k.state_indexes(p), k.retired(p), k.waits(p)]
    event = k.sealer.seal_text(d.event.decode()) if k.sealer is not None else d.event
    args: list[object] = [op, sm.limits.history_maxlen, actor[:500], d.version, d.step]
    args += [d.summary[:200], k.seal(d.decisions), event, "1" if d.complete else "0"]
    args += [k.seal(d.reviewed) if d.complete else b"", d.next_step if d.complete else ""]
    args += [sm.limits.retention.arg(), len(d.rerun), *steps]
    reply = await sm._resend(lambda: evalsha(sm.client, "decide_review", keys, args))
    code = to_code(reply[0])
    if code == RC.WRONG_STATE:
        why = text(reply[1])
        if why == "not_flagged":
            raise StepConflictError(f"record {record_id!r} has no review open at {d.step!r}")
        raise StepConflictError(
            f"record {record_id!r} is {why}; review it once it completes or waits at its "
            "review gate"
        )
    if code == RC.CONFLICT:
        raise_for(code, record_id, f"it is at version {num(reply[1])}, you read {d.version}")
    raise_for(code, record_id)
    return Decided(
        version=num(reply[1]),
        epoch=num(reply[2]),
        entry=text(reply[3]),
        duplicate=code == RC.DUPLICATE,
    )
