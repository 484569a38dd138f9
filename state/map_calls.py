"""A map step's transitions as the state machine calls them (``claim_items``,
``commit_items``, ``fail_items``, ``extend_item``, ``promote_items``; the fields they
keep are described in ``lua/includes/map_items.lua``): the keys and arguments of each
script, kept apart from ``machine.py``, which dispatches to them for a claim whose
``item`` is set."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import msgspec

from saga.state.codes import RC, raise_for, to_code
from saga.state.days import utc_day
from saga.state.keys import GROUP
from saga.state.model import Claim, undo_of
from saga.state.replies import ClaimOutcome, num, text
from saga.state.requests import CommitRequest, FailRequest
from saga.state.scripts import evalsha
from saga.state.sealing import error_field

if TYPE_CHECKING:
    from saga.state.machine import StateMachine

Call = tuple[str, list[str], list[Any]]

MAX_ITEMS = 1000
"""Items a map may have: the fan-in gathers them in one script (a bounded loop)."""
MAX_CONCURRENCY = 100


class MapPlan(msgspec.Struct, frozen=True, kw_only=True):
    """What the scripts need to know of a map step (``StepSpec.map`` and its place)."""

    over: str
    """The step whose output (a list) the items are."""
    next_step: str = ""
    """The step after the map ("" completes the saga at the fan-in)."""
    concurrency: int = 10
    on_failure: str = "fail"
    max_items: int = MAX_ITEMS
    undo: tuple[str, ...] = ()
    """The pipeline's steps with a compensation, latest first (``Pipeline.undoable``): an
    item that fails for good under on_failure="fail" starts their compensation."""


async def claim_items(
    sm: StateMachine,
    step: str,
    partition: int,
    entries: Sequence[tuple[str, str, str, int]],
    *,
    plan: MapPlan,
    worker: str,
    lease_ms: int,
    max_lease_expiries: int,
    op: str,
) -> list[ClaimOutcome]:
    """Claim (entry id, record id, item or "", the entry's epoch) of one partition, ≤100 per
    call. An item's claim carries its element of the parent's list as ``input`` and ``item``.
    With a data key, the parent's sealed list is counted here for each spawn (no script
    can open it)."""
    if not entries:
        return []
    k = sm.keys
    counts = await _sealed_counts(sm, plan.over, entries)
    ready = k.ready(partition, step)
    keys = [ready, k.quarantine(partition), k.dead(partition, step), k.stats(partition)]
    keys += [*k.state_indexes(partition), k.retired(partition)]
    keys.append(k.ready(partition, plan.next_step) if plan.next_step else ready)
    args: list[Any] = [GROUP, step, worker, lease_ms, op, sm.limits.history_maxlen, plan.over]
    args += [max_lease_expiries, plan.concurrency, plan.max_items, plan.next_step]
    args += [plan.on_failure, sm.limits.retention.arg(), len(plan.undo[:32]), *plan.undo[:32]]
    keys += [k.ready(partition, undo_of(s)) for s in plan.undo[:32]]
    for entry_id, record_id, item, epoch in entries:
        rk = k.record(record_id)
        keys += [rk.saga, rk.history]
        args += [entry_id, record_id, item, epoch, counts.get(record_id, "")]
    replies = await sm._resend(lambda: evalsha(sm.client, "claim_items", keys, args))
    unseal = k.unseal if k.sealer is not None else None
    return [_outcome(r, step, unseal) for r in replies]


async def _sealed_counts(
    sm: StateMachine, over: str, entries: Sequence[tuple[str, str, str, int]]
) -> dict[str, str]:
    """How many items the parent's sealed output holds, per record of a spawn entry ("-1":
    no list); nothing without a data key (the script counts them itself)."""
    spawns = sorted({rid for _, rid, item, _ in entries if item == ""})
    if sm.keys.sealer is None or not spawns:
        return {}

    async def read() -> list[Any]:  # the spawns' lists in one round trip
        pipe = sm.client.pipeline(transaction=False)
        for rid in spawns:
            pipe.hget(sm.keys.saga(rid), f"out:{over}")
        return list(await pipe.execute())

    out = {}
    for rid, raw in zip(spawns, await sm._resend(read), strict=True):
        try:
            items = msgspec.json.decode(sm.keys.unseal(bytes(raw or b"")), type=list[msgspec.Raw])
            out[rid] = str(len(items))
        except (msgspec.DecodeError, ValueError):
            out[rid] = "-1"
    return out


def _outcome(reply: list[Any], step: str, unseal: Any = None) -> ClaimOutcome:
    code = to_code(reply[0])
    entry, record = text(reply[1]), text(reply[2])
    if code not in (RC.OK, RC.DUPLICATE):
        return ClaimOutcome(code, entry, record, None, text(reply[3]) if len(reply) > 3 else "")
    item = num(reply[12])
    raw = bytes(reply[8] or b"[]")
    items = msgspec.json.decode(unseal(raw) if unseal else raw, type=list[msgspec.Raw])
    claim = Claim(
        record_id=record,
        user_id=text(reply[3]),
        step=step,
        entry_id=entry,
        attempt=num(reply[4]),
        epoch=num(reply[5]),
        token=text(reply[6]),
        lease_until_ms=num(reply[7]),
        input=bytes(items[item]) if item < len(items) else b"null",
        document=text(reply[9]),
        trace=text(reply[10]),
        created_ms=num(reply[11]),
        expired=num(reply[13]),
        item=item,
    )
    return ClaimOutcome(code, entry, record, claim)


async def with_pages(sm: StateMachine, outcomes: list[ClaimOutcome]) -> list[ClaimOutcome]:
    """The item claims among ``outcomes`` with the record's pages blob (``Claim.pages``),
    read in one pipeline: claim_items returns no blob, and an item's step may read the
    pages (``@app.map(loads_pages=True)``). A blob gone (expired) stays None."""
    claimed = [(i, o) for i, o in enumerate(outcomes) if o.claim is not None]
    if not claimed:
        return outcomes

    async def read() -> list[Any]:
        pipe = sm.client.pipeline(transaction=False)
        for _, o in claimed:
            pipe.get(sm.keys.pages(o.record_id))
        return list(await pipe.execute())

    blobs = await sm._resend(read)
    out = list(outcomes)
    for (i, o), blob in zip(claimed, blobs, strict=True):
        assert o.claim is not None
        pages = sm.keys.unseal(bytes(blob)) if blob else None
        out[i] = msgspec.structs.replace(o, claim=msgspec.structs.replace(o.claim, pages=pages))
    return out


def item_call(sm: StateMachine, claim: Claim, req: CommitRequest | FailRequest, op: str) -> Call:
    """The commit_items or fail_items call of an item's attempt."""
    plan = sm.maps[claim.step]
    k = sm.keys
    rk = k.record(claim.record_id)
    p, day = rk.partition, utc_day()
    ready = k.ready(p, claim.step)
    after = k.ready(p, plan.next_step) if plan.next_step else ready
    head = [GROUP, claim.step, str(claim.item), claim.token, claim.entry_id]
    if isinstance(req, CommitRequest):
        keys = [rk.saga, rk.history, ready, after, k.stats(p), k.costs(p, day[0])]
        keys += [k.spend(p, day[1]), *k.state_indexes(p), k.retired(p)]
        keys += [k.holds(p), k.holds_due(p), *req.cost_keys[:64]]
        args = [*head, k.seal(req.output), op, req.worker, repr(req.cost), req.tokens]
        args += [plan.concurrency, plan.next_step, plan.on_failure, sm.limits.history_maxlen]
        args += [day[2], sm.limits.retention.arg(), len(req.cost_keys[:64])]
        return "commit_items", keys, args
    keys = [rk.saga, rk.history, ready, k.item_retries(p, claim.step), k.dead(p, claim.step)]
    keys += [k.stats(p), k.costs(p, day[0]), k.spend(p, day[1]), *k.state_indexes(p)]
    keys += [k.retired(p), after, k.holds(p), k.holds_due(p), *req.cost_keys[:64]]
    keys += [k.ready(p, undo_of(s)) for s in plan.undo[:32]]
    em = error_field(req.error_message[:500], req.error_detail, k.sealer)
    args = [*head, req.action.value, req.delay_ms, req.error_class, em, op]
    args += [req.worker, repr(req.cost), req.tokens, plan.concurrency, plan.next_step]
    args += [plan.on_failure, sm.limits.history_maxlen, day[2], sm.limits.retention.arg()]
    args += [len(plan.undo[:32]), *plan.undo[:32], len(req.cost_keys[:64])]
    return "fail_items", keys, args


async def extend_item(sm: StateMachine, claim: Claim, *, worker: str, lease_ms: int) -> int:
    """An item's heartbeat; returns the new deadline (ms). Raises LeaseLostError if fenced."""
    p = sm.keys.partition_of(claim.record_id)
    keys = [sm.keys.saga(claim.record_id), sm.keys.ready(p, claim.step)]
    args = [claim.token, lease_ms, GROUP, worker, claim.entry_id, claim.step, str(claim.item)]
    reply = await sm._resend(lambda: evalsha(sm.client, "extend_item", keys, args))
    raise_for(to_code(reply[0]), claim.record_id)
    return num(reply[1])


async def requeue_items(
    sm: StateMachine,
    step: str,
    partition: int,
    entries: Sequence[tuple[str, str, str, int]],
    *,
    min_idle_ms: int,
) -> list[RC]:
    """The controller's requeue of a map's idle item entries (entry id, record id, item,
    epoch), ≤100 per call: the code of each (OK: requeued for a takeover)."""
    if not entries:
        return []
    keys = [sm.keys.ready(partition, step), *[sm.keys.saga(r) for _, r, _, _ in entries]]
    args: list[Any] = [GROUP, min_idle_ms, step]
    for entry_id, _, item, epoch in entries:
        args += [entry_id, item, epoch]
    replies = await sm._resend(lambda: evalsha(sm.client, "requeue_items", keys, args))
    return [to_code(r[0]) for r in replies]


async def promote_items(sm: StateMachine, step: str, partition: int, most: int = 100) -> int:
    """Send a map's due item retries back to its ready stream; returns how many."""
    keys = [sm.keys.item_retries(partition, step), sm.keys.ready(partition, step)]
    reply = await evalsha(sm.client, "promote_items", keys, [min(most, 100)])
    return num(reply[1])
