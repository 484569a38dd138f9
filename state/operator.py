"""Operator transitions: re-run a saga from a step, cancel it (and compensate it),
accept its review."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import msgspec

from saga.state.codes import RC, raise_for, to_code
from saga.state.errors import SagaNotFoundError, StepConflictError
from saga.state.ids import validate_id, validate_step
from saga.state.keys import GROUP
from saga.state.machine import StateMachine, new_op
from saga.state.model import undo_of
from saga.state.replies import num, text
from saga.state.scripts import evalsha


class RetryResult(msgspec.Struct, frozen=True):
    epoch: int
    entry_id: str
    duplicate: bool = False
    step: str = ""
    """The step the saga re-runs from."""


async def current_step(sm: StateMachine, record_id: str) -> str:
    step = await sm.client.hget(sm.keys.saga(record_id), "step")
    if step is None:
        raise SagaNotFoundError(f"no saga exists for record {record_id!r}")
    return text(step)


async def _at_current_step(
    sm: StateMachine,
    record_id: str,
    script: str,
    keys_before: list[str],
    args: Callable[[str], list[object]],
    keys_after: Sequence[str] = (),
) -> list[Any]:
    """Run an operator script whose KEYS name the saga's current step's ready, delayed
    and dead streams and its per-user cap's slots and deferrals: read the step, run, and
    again if the step moved in between."""
    k, p = sm.keys, sm.keys.partition_of(record_id)
    for _ in range(3):
        cur = await current_step(sm, record_id)
        keys = [*keys_before, k.ready(p, cur), k.delayed(p, cur), k.dead(p, cur)]
        keys += [k.inflight(p, cur), k.deferred(p, cur)]
        keys += k.state_indexes(p)
        keys += keys_after
        argv = args(cur)
        reply: list[Any] = await sm._resend(lambda: evalsha(sm.client, script, keys, argv))  # noqa: B023
        if not (to_code(reply[0]) == RC.WRONG_STATE and text(reply[1]) == "step_moved"):
            return reply
    raise StepConflictError(f"record {record_id!r} kept moving between steps; try again")


async def retry(
    sm: StateMachine,
    record_id: str,
    from_step: str,
    prev_step: str,
    *,
    force: bool = False,
    actor: str = "operator",
    op: str | None = None,
    steps: Sequence[str] = (),
) -> RetryResult:
    """Re-run from ``from_step`` in a new epoch; ``prev_step`` is the step whose output it reads.

    ``steps`` is the pipeline's step order: the review flags of ``from_step`` and the
    steps after it are cleared (they run again), those of earlier steps stay. Without
    it no flag changes."""
    validate_id(record_id)
    validate_step(from_step)
    op = op or new_op()
    k, p = sm.keys, sm.keys.partition_of(record_id)
    before = [k.saga(record_id), k.history(record_id), k.ready(p, from_step)]
    rerun, kept = _split_at(steps, from_step)

    def args(cur: str) -> list[object]:
        flag = "1" if force else "0"
        head = [from_step, prev_step, cur, flag, GROUP, op, sm.limits.history_maxlen, actor]
        return [*head, len(rerun), *rerun, *kept]

    after = [k.review_index(p)]
    reply = await _at_current_step(sm, record_id, "retry_saga", before, args, after)
    code = to_code(reply[0])
    if code == RC.WRONG_STATE:
        raise StepConflictError(
            f"record {record_id!r} has no output of step {text(reply[2])!r} "
            f"to re-run {from_step!r} from; retry from an earlier step"
        )
    if code == RC.BUSY:
        raise_for(code, record_id, f"worker {text(reply[1])}")
    raise_for(code, record_id)
    return RetryResult(num(reply[1]), text(reply[2]), code == RC.DUPLICATE, from_step)


def _split_at(steps: Sequence[str], from_step: str) -> tuple[list[str], list[str]]:
    """(the steps from ``from_step`` on, the steps before it); ([], []) without a pipeline."""
    names = list(steps)[:32]
    if from_step not in names:
        return [], []
    at = names.index(from_step)
    return names[at:], names[:at]


async def accept_review(
    sm: StateMachine,
    record_id: str,
    steps: Sequence[str],
    *,
    actor: str = "operator",
    op: str | None = None,
) -> int:
    """A person accepts the saga's flagged results: every flag of ``steps`` is cleared and
    the acceptance recorded in history; a saga parked at a review gate moves on to the
    step after it in the same script. Returns how many flags were cleared."""
    validate_id(record_id)
    op = op or new_op()
    k = sm.keys
    p = k.partition_of(record_id)
    names = [validate_step(s) for s in steps][:32]
    for _ in range(3):  # a gate whose next step moved between the read and the call
        wnext = text(await sm.client.hget(k.saga(record_id), "wnext"))
        keys = [k.saga(record_id), k.history(record_id), k.review_index(p), k.retired(p)]
        keys += [k.ready(p, wnext) if wnext else k.waits(p), *k.state_indexes(p), k.waits(p)]
        args = [op, sm.limits.history_maxlen, actor, sm.limits.retention.arg(), wnext, *names]
        reply = await sm._resend(lambda: evalsha(sm.client, "accept_review", keys, args))  # noqa: B023
        code = to_code(reply[0])
        if code == RC.WRONG_STATE and text(reply[1]) == "step_moved":
            continue
        if code == RC.WRONG_STATE:
            raise StepConflictError(f"record {record_id!r} is not flagged for review")
        raise_for(code, record_id)
        return num(reply[1])
    raise StepConflictError(f"record {record_id!r} kept moving at its review gate; try again")


async def cancel(
    sm: StateMachine, record_id: str, *, actor: str = "operator", op: str | None = None
) -> str:
    """Cancel a saga; returns the state it was in. Cancelling twice is a no-op."""
    validate_id(record_id)
    op = op or new_op()
    before = [sm.keys.saga(record_id), sm.keys.history(record_id)]
    reply = await _at_current_step(
        sm,
        record_id,
        "cancel_saga",
        before,
        lambda cur: [cur, GROUP, op, sm.limits.history_maxlen, actor, sm.limits.retention.arg()],
        [
            sm.keys.retired(sm.keys.partition_of(record_id)),
            sm.keys.waits(sm.keys.partition_of(record_id)),
        ],
    )
    code = to_code(reply[0])
    if code == RC.WRONG_STATE:
        raise StepConflictError(f"record {record_id!r} is {text(reply[1])}; nothing to cancel")
    raise_for(code, record_id)
    return text(reply[1])


class CompensateResult(msgspec.Struct, frozen=True):
    state: str
    """compensating, or compensated when nothing needed undoing."""
    step: str
    """The first undo step (``undo:<step>``) when compensating."""
    duplicate: bool = False


async def compensate(
    sm: StateMachine,
    record_id: str,
    undoable: Sequence[str],
    *,
    actor: str = "operator",
    op: str | None = None,
) -> CompensateResult:
    """Stop a saga and undo its committed steps, latest first (``compensate_saga.lua``).

    ``undoable``: the steps of its pipeline that have a compensation, latest first
    (``Pipeline.undoable()``). From compensation_failed it resumes: the undos not yet
    done run again. Compensating or compensated already: nothing changes."""
    validate_id(record_id)
    if len(undoable) > 32:
        raise ValueError("at most 32 steps with a compensation")
    op = op or new_op()
    k, p = sm.keys, sm.keys.partition_of(record_id)
    before = [k.saga(record_id), k.history(record_id)]
    after = [*(k.ready(p, undo_of(s)) for s in undoable), k.retired(p), k.waits(p)]
    ret = sm.limits.retention.arg()
    reply = await _at_current_step(
        sm,
        record_id,
        "compensate_saga",
        before,
        lambda cur: [cur, GROUP, op, sm.limits.history_maxlen, actor, *_plan(undoable, ret)],
        after,
    )
    code = to_code(reply[0])
    if code == RC.WRONG_STATE:
        raise StepConflictError(f"record {record_id!r} is {text(reply[1])}; nothing to compensate")
    raise_for(code, record_id)
    return CompensateResult(text(reply[1]), text(reply[2]), code == RC.DUPLICATE)


def _plan(undoable: Sequence[str], ret: str) -> list[object]:
    """compensate_saga's steps to undo (their count first) and the retention table."""
    return [len(undoable), *undoable, ret]
