"""The undo steps' transitions as the state machine calls them (``claim_undo``,
``commit_undo``, ``fail_undo``): the keys and arguments of each script, kept apart
from ``machine.py``, which dispatches to them when a step is ``undo:<step>``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import msgspec

from saga.state.days import utc_day
from saga.state.keys import GROUP
from saga.state.model import Claim
from saga.state.replies import ClaimOutcome, claim_outcome
from saga.state.requests import CommitRequest, FailRequest
from saga.state.scripts import evalsha
from saga.state.sealing import error_field

if TYPE_CHECKING:
    from saga.state.machine import StateMachine

Call = tuple[str, list[str], list[Any]]


class UndoClaim(NamedTuple):
    worker: str
    lease_ms: int
    max_lease_expiries: int
    prev_step: str
    """The step whose output is the undone step's input ("_input" for the first)."""
    op: str


async def claim_undo(
    sm: StateMachine,
    step: str,
    partition: int,
    entries: Sequence[tuple[str, str]],
    c: UndoClaim,
) -> list[ClaimOutcome]:
    """``claim`` of an undo step: the claim's ``extra`` holds the undone step's
    ``output``, its commit token (``done``) and the undo plan left (``undo``)."""
    k = sm.keys
    keys = [k.ready(partition, step), k.dead(partition, step), k.stats(partition)]
    keys += [*k.state_indexes(partition), k.retired(partition)]
    args: list[Any] = [GROUP, step, c.worker, c.lease_ms, c.op, sm.limits.history_maxlen]
    args += [c.max_lease_expiries, c.prev_step or "_input", sm.limits.retention.arg()]
    for entry_id, record_id in entries:
        rk = k.record(record_id)
        keys += [rk.saga, rk.history]
        args += [entry_id, record_id]
    replies = await evalsha(sm.client, "claim_undo", keys, args)
    unseal = k.unseal if k.sealer is not None else None
    out = []
    for r in replies:
        got = claim_outcome(r, step, ("output",), unseal)
        if got.claim is not None:
            extra = {**got.claim.extra, "done": bytes(r[15] or b""), "undo": bytes(r[16] or b"")}
            claim = msgspec.structs.replace(got.claim, extra=extra)
            got = msgspec.structs.replace(got, claim=claim)
        out.append(got)
    return out


def commit_undo_call(sm: StateMachine, claim: Claim, req: CommitRequest, op: str) -> Call:
    k = sm.keys
    rk = k.record(claim.record_id)
    p = rk.partition
    ready = k.ready(p, claim.step)
    keys = [rk.saga, rk.history, ready, k.ready(p, req.next_step) if req.next_step else ready]
    keys += [k.stats(p), *k.state_indexes(p)]
    args: list[Any] = [claim.step, claim.token, claim.entry_id, GROUP, req.next_step]
    args += [op, sm.limits.history_maxlen, req.worker]
    bill_keys, bill_args = _billing(sm, p, req)
    keys += bill_keys
    args += [*bill_args, _item(claim)]
    return "commit_undo", keys, args


def _item(claim: Claim) -> str:
    """The map item the claim's plan head names ("" for a step): '<map>[<i>]'."""
    head = (claim.extra.get("undo") or b"").decode().split(",", 1)[0]
    _, bracket, rest = head.partition("[")
    return rest[:-1] if bracket and rest.endswith("]") and rest[:-1].isdigit() else ""


def fail_undo_call(sm: StateMachine, claim: Claim, req: FailRequest, op: str) -> Call:
    k = sm.keys
    rk = k.record(claim.record_id)
    p = rk.partition
    keys = [rk.saga, rk.history, k.ready(p, claim.step), k.delayed(p, claim.step)]
    keys += [k.dead(p, claim.step), k.stats(p), *k.state_indexes(p)]
    args: list[Any] = [claim.step, claim.token, claim.entry_id, GROUP, req.action.value]
    em = error_field(req.error_message, req.error_detail, k.sealer)
    args += [req.delay_ms, req.error_class, em, op]
    args += [sm.limits.history_maxlen, req.worker]
    bill_keys, bill_args = _billing(sm, p, req)
    keys += bill_keys
    args += bill_args
    return "fail_undo", keys, args


def _billing(
    sm: StateMachine, p: int, req: CommitRequest | FailRequest
) -> tuple[list[str], list[Any]]:
    """The keys and arguments an undo attempt bills its LLM cost with, as a step
    attempt's commit or fail does: the day's totals, the month's spend, cached answers."""
    date, month, dd = utc_day()
    cached = list(req.cost_keys[:64])
    keys = [sm.keys.costs(p, date), sm.keys.spend(p, month), *cached, sm.keys.retired(p)]
    keys += (sm.keys.holds(p), sm.keys.holds_due(p))  # budget holds released with the cost
    return keys, [repr(req.cost), req.tokens, len(cached), dd, sm.limits.retention.arg()]
