"""The arguments of the commit and fail scripts (commit_steps, fail_step): which keys
and values one attempt's end sends, built here so ``StateMachine`` only sends them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from saga.state.days import utc_day
from saga.state.keys import GROUP, RecordKeys
from saga.state.lanes import is_route, route_children
from saga.state.model import Claim, FailAction, is_undo, undo_of
from saga.state.op_ids import new_op
from saga.state.requests import CommitRequest, FailRequest
from saga.state.sealing import error_field
from saga.state.undo_calls import fail_undo_call

if TYPE_CHECKING:
    from saga.state.machine import StateMachine

Call = tuple[str, list[str], list[Any]]


def commit_batch(sm: StateMachine, partition: int, day: tuple[str, str, str]) -> Call:
    """An empty commit_steps call for one partition: its attempts are added to it."""
    k = sm.keys
    keys = [
        k.stats(partition),
        k.costs(partition, day[0]),
        k.retired(partition),
        *sm.keys.state_indexes(partition),
        k.review_index(partition),
        k.spend(partition, day[1]),
        k.holds(partition),
        k.holds_due(partition),
        k.waits(partition),
    ]
    lim = sm.limits
    args: list[Any] = [GROUP, lim.history_maxlen, lim.pages_ttl_s, lim.retention.arg()]
    args += [day[2], 0]
    return "commit_steps", keys, args


def add_commit(
    sm: StateMachine, call: Call, rk: RecordKeys, claim: Claim, req: CommitRequest
) -> None:
    """Add one attempt to a commit_steps call of its partition (see its header)."""
    _, keys, args = call
    k = sm.keys
    p, step = rk.partition, claim.step
    ready = k.ready(p, step)
    keys += (rk.saga, rk.history, rk.pages, ready)
    kids = route_children(req.next_step)  # a route: one ready stream per child
    if kids:
        keys.append(k.ready(p, kids[0]))
    elif req.next_step and not is_route(req.next_step):
        keys.append(k.ready(p, req.next_step))
    else:
        keys.append(ready)
    cap, lease_ms = sm.user_caps.get(step, (0, 0))
    if cap > 0:  # the script reads the two keys when the lease it is given is > 0
        keys += (k.inflight(p, step), k.deferred(p, step))
        lease_ms = max(lease_ms, 1)
    else:
        lease_ms = 0
    cost_keys = req.cost_keys[:64]
    keys += cost_keys
    keys += [k.ready(p, kid) for kid in kids[1:32]]
    if k.sealer is None:
        output, pages, checkpoint = req.output, req.pages or b"", req.checkpoint or b""
    else:  # encrypted before they leave the process (state/sealing.py)
        output, pages, checkpoint = (
            k.seal(req.output),
            k.seal(req.pages or b""),
            k.seal(req.checkpoint or b""),
        )
    args += (step, claim.token, claim.entry_id, req.next_step, output, req.op or new_op())
    args += (pages, "1" if req.delete_pages else "0", repr(req.cost), checkpoint)
    args += (req.worker, req.tokens, len(cost_keys), req.review, lease_ms, req.step_version)
    args.append(req.not_before_arg())
    args[5] += 1


def fail_call(sm: StateMachine, claim: Claim, req: FailRequest) -> Call:
    if is_undo(claim.step):
        return fail_undo_call(sm, claim, req, req.op or new_op())
    k = sm.keys
    rk = k.record(claim.record_id)
    p, day = rk.partition, utc_day()
    keys = [
        rk.saga,
        rk.history,
        k.ready(p, claim.step),
        k.delayed(p, claim.step),
        k.dead(p, claim.step),
        k.stats(p),
        k.costs(p, day[0]),
        *sm.keys.state_indexes(p),
        k.spend(p, day[1]),
        k.inflight(p, claim.step),
        k.deferred(p, claim.step),
        *req.cost_keys[:64],
    ]
    args: list[Any] = [claim.step, claim.token, claim.entry_id, GROUP, req.action.value]
    em = error_field(req.error_message, req.error_detail, k.sealer)
    args += [req.delay_ms, req.error_class, em, req.op or new_op()]
    args += [sm.limits.history_maxlen, repr(req.cost), req.worker, req.tokens]
    args += [len(req.cost_keys[:64]), day[2], *capped(sm, claim.step)]
    undo = req.undo[:32] if req.action == FailAction.DEAD else ()
    keys += [k.ready(p, undo_of(s)) for s in undo]
    keys += (k.retired(p), k.holds(p), k.holds_due(p))
    args += [len(undo), *undo, sm.limits.retention.arg(), req.step_version]
    return "fail_step", keys, args


def capped(sm: StateMachine, step: str) -> list[Any]:
    cap, lease_ms = sm.user_caps.get(step, (0, 0))
    return ["1", lease_ms] if cap > 0 else ["0", 0]
