"""Waits, signals and their timers: the Python face of park_wait, signal_saga and
time_out_wait.

A wait step (``@app.wait``, ``@app.sleep``) runs no user code: the worker that claims
it parks the saga (``park``), state ``waiting``, no lease held. A signal
(``signal``) ends the wait, or is kept in the saga's hash for the wait to come; a
timer (the wait's timeout, or the sleep's end) sits in the partition's waits (a zset by
due time, ``Keys.waits``) until the sweep (``time_out_due``, every worker's and the
controller's promote loop) takes the wait's declared path.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any, Literal

import msgspec

from saga.state.codes import RC, raise_for, to_code
from saga.state.ids import validate_id, validate_step
from saga.state.keys import GROUP
from saga.state.machine import StateMachine, new_op
from saga.state.model import Claim
from saga.state.replies import text
from saga.state.requests import Outcome
from saga.state.scripts import evalsha, evalsha_many

OnTimeout = Literal["fail", "compensate", "default", "continue"]
ON_TIMEOUT: tuple[str, ...] = ("fail", "compensate", "default", "continue")
"""What a due timer does: dead-letter the saga at the wait, compensate its committed
steps, go on with the wait's default as the signal's data, or (a sleep) go on with the
wait's input passed through."""

_SWEEP_BATCH = 100
"""Due timers read, and timed out in one round trip, per partition and pass."""

KEPT_MAX = 16
"""Signals a saga keeps at once for waits it has not reached (one per event); past it a
signal of another event is refused."""
KEPT_MAX_AGE_MS = 7 * 24 * 3600 * 1000
"""A kept signal older than this (7 days) is dropped when its wait comes, not consumed."""
SEEN_MAX = 1000
"""Signal ids a saga remembers (for a resend's no-op); past it a new id is refused."""
_BOUNDS = {
    "too_many_kept": f"it keeps {KEPT_MAX} signals for waits to come already; send this "
    "one when the saga reaches its wait",
    "too_many_ids": f"it has had {SEEN_MAX} signals already; no more are taken",
}


class WaitPlan(msgspec.Struct, frozen=True, kw_only=True):
    """What the worker parks a saga with at a wait step."""

    event: str
    """The event it waits for; "" for a sleep (only its timer ends it)."""
    next_step: str
    due_ms: int = 0
    """When its timer is due (server ms); 0: no timer (unless ``after_ms``)."""
    after_ms: int = 0
    """The timer's delay from the park, by the server's clock (used when > 0)."""
    on_timeout: str = "fail"
    default: bytes = b""
    """The wait's output when ``on_timeout`` is ``default`` (JSON)."""
    undo: tuple[str, ...] = ()
    """The pipeline's steps with a compensation, latest first (``compensate``)."""
    gate: bool = False
    """A review gate: an unflagged saga passes at once, a flagged one waits for
    ``accept_review`` (or the decision completing its review)."""


class SignalResult(msgspec.Struct, frozen=True, kw_only=True):
    """What a signal did: ``consumed`` (the wait ended: ``next_step`` runs), ``kept``
    (for the wait to come), ``dropped`` (another signal of the event is kept), or
    ``seen`` (this signal id was delivered before: nothing changed)."""

    record_id: str
    event: str
    signal_id: str
    outcome: str
    state: str
    next_step: str = ""


def new_signal_id() -> str:
    return os.urandom(8).hex()


async def park(sm: StateMachine, claim: Claim, plan: WaitPlan, *, worker: str) -> Outcome:
    """End a claimed attempt at a wait step: park the saga, or consume a kept signal."""
    if plan.on_timeout not in ON_TIMEOUT:
        raise ValueError(f"on_timeout must be one of {', '.join(ON_TIMEOUT)}")
    k = sm.keys
    rk = k.record(claim.record_id)
    p = rk.partition
    keys = [rk.saga, rk.history, k.ready(p, claim.step), k.ready(p, plan.next_step)]
    keys += [k.waits(p), *k.state_indexes(p), k.review_index(p)]
    default = k.seal(plan.default) if plan.default else ""
    args: list[Any] = [claim.step, claim.token, claim.entry_id, GROUP, plan.event]
    due = f"+{plan.after_ms}" if plan.after_ms > 0 else plan.due_ms
    args += [plan.next_step, due, plan.on_timeout, default, ",".join(plan.undo[:32])]
    args += [new_op(), sm.limits.history_maxlen, worker, KEPT_MAX_AGE_MS, "1" if plan.gate else ""]
    reply = await sm._resend(lambda: sm._durable("park_wait", keys, args))
    code = to_code(reply[0])
    state = text(reply[1]) if len(reply) > 1 else ""
    detail = text(reply[2]) if len(reply) > 2 else ""
    return Outcome(code, state, detail)


async def signal(
    sm: StateMachine,
    record_id: str,
    event: str,
    *,
    data: bytes = b"{}",
    signal_id: str = "",
) -> SignalResult:
    """Deliver ``event`` to a saga (``saga signal``). The same ``signal_id`` twice is a
    no-op; a fresh one is made when none is given (a re-send after a dropped reply keeps
    it). Raises SagaNotFoundError, or StepConflictError for a saga that has ended."""
    validate_id(record_id, "record_id")
    validate_step(event)
    sid = validate_id(signal_id, "signal id") if signal_id else new_signal_id()
    k = sm.keys
    rk = k.record(record_id)
    p, sealed, op = rk.partition, k.seal(data), new_op()
    for _ in range(3):  # a wait that moved on between the read and the call: read again
        wnext = text(await sm.client.hget(rk.saga, "wnext"))
        keys = [rk.saga, rk.history, k.ready(p, wnext) if wnext else k.waits(p), k.waits(p)]
        keys += k.state_indexes(p)
        args = [event, sid, sealed, wnext, op, sm.limits.history_maxlen, KEPT_MAX, SEEN_MAX]
        reply = await sm._resend(lambda: sm._durable("signal_saga", keys, args))  # noqa: B023
        code = to_code(reply[0])
        why = text(reply[2]) if len(reply) > 2 else ""
        if code == RC.WRONG_STATE and why == "step_moved":
            continue
        if code == RC.WRONG_STATE and why in _BOUNDS:
            raise_for(code, record_id, _BOUNDS[why])
        if code == RC.WRONG_STATE:
            raise_for(code, record_id, f"it has ended ({text(reply[1])}); no wait is left")
        raise_for(code, record_id)
        return SignalResult(
            record_id=record_id,
            event=event,
            signal_id=sid,
            outcome=why,
            state=text(reply[1]),
            next_step=text(reply[3]) if len(reply) > 3 else "",
        )
    raise_for(RC.WRONG_STATE, record_id, "its wait kept moving; send the signal again")
    raise AssertionError("unreachable")


async def due_waits(sm: StateMachine, partition: int, now_ms: int, limit: int) -> list[str]:
    """Records whose timer is due at ``now_ms`` (the earliest first)."""
    rows = await sm.client.zrangebyscore(sm.keys.waits(partition), "-inf", now_ms, 0, limit)
    return [text(r) for r in rows]


async def time_out_due(sm: StateMachine, partition: int, now_ms: int) -> dict[str, int]:
    """Take the declared path of every wait due in ``partition`` at ``now_ms`` (server
    ms), up to a batch per call; returns how many took each path. The script re-checks
    each against the server's clock, so racing sweepers never time one out twice."""
    records = await due_waits(sm, partition, now_ms, _SWEEP_BATCH)
    if not records:
        return {}
    k = sm.keys
    pipe = sm.client.pipeline(transaction=False)
    for rid in records:
        pipe.hmget(k.saga(rid), "wnext", "wundo", "step")
    fields = await pipe.execute()
    calls = [_time_out_call(sm, partition, rid, f) for rid, f in zip(records, fields, strict=True)]
    replies = await sm._resend(lambda: evalsha_many(sm.client, calls))
    paths: dict[str, int] = {}
    for reply in replies:
        if isinstance(reply, Exception):
            raise reply
        if to_code(reply[0]) == RC.OK:
            path = text(reply[2])
            paths[path] = paths.get(path, 0) + 1
    return paths


def _time_out_call(
    sm: StateMachine, partition: int, record_id: str, fields: Sequence[Any]
) -> tuple[str, list[str], list[Any]]:
    k = sm.keys
    rk = k.record(record_id)
    wnext, wundo = text(fields[0]), text(fields[1])
    undo = [s for s in wundo.split(",") if s][:32]
    keys = [rk.saga, rk.history, k.waits(partition)]
    keys.append(k.ready(partition, wnext) if wnext else k.waits(partition))
    keys += [k.dead(partition, text(fields[2]) or "wait"), k.stats(partition)]
    keys += [*k.state_indexes(partition), k.retired(partition)]
    keys += [k.ready(partition, f"undo:{s}") for s in undo]
    args: list[Any] = [record_id, wnext, new_op(), sm.limits.history_maxlen]
    args += [sm.limits.retention.arg(), len(undo), *undo]
    return "time_out_wait", keys, args


async def time_out_one(sm: StateMachine, record_id: str) -> str:
    """Time out one record's wait if it is due (tests and ``saga signal``'s neighbours);
    returns the path taken, or why none was."""
    k = sm.keys
    rk = k.record(record_id)
    fields = await sm.client.hmget(rk.saga, "wnext", "wundo", "step")
    name, keys, args = _time_out_call(sm, rk.partition, record_id, fields)
    reply = await sm._resend(lambda: evalsha(sm.client, name, keys, args))
    code = to_code(reply[0])
    raise_for(code, record_id)
    return text(reply[2])
