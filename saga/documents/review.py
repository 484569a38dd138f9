"""Reviewing a flagged saga value by value: what the console, the API and the CLI share.

``load`` reads the review of the saga's flagged parser output (the items, their
decisions and the version read); ``decide`` builds one decision from it and records
it through ``decide_review.lua`` with that version, so a decision another reviewer
made meanwhile is a conflict, never overwritten. The last flagged item's decision
completes the review: the steps after the reviewed one re-run on the reviewed values
in a new epoch.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import msgspec

from saga.state import review as store
from saga.state.errors import StepConflictError
from saga.state.keys import Keys
from saga.state.machine import StateMachine
from saga.steps import review as rv
from saga.steps.models import ParserOutput

_OUT = msgspec.json.Decoder(ParserOutput)
_MADE = msgspec.json.Decoder(rv.Decisions)


class ReviewView(msgspec.Struct, frozen=True, kw_only=True):
    """One saga's review: ``saga review show --json`` and the API's document."""

    record_id: str
    step: str
    version: int
    state: str
    reason: str
    """The step's review reason; "" once the review is complete."""
    complete: bool
    items: list[rv.Item]
    undecided: int
    next_step: str = ""


class DecideResult(msgspec.Struct, frozen=True, kw_only=True):
    record_id: str
    item: str
    kind: str
    version: int
    completed: bool
    """This decision completed the review: ``rerun`` runs on the reviewed values."""
    rerun: str = ""
    duplicate: bool = False


async def reviewed_step(client: Any, keys: Keys, record_id: str, steps: Sequence[str]) -> str:
    """The step under review: the first flagged step, else one with decisions; "" if none."""
    fields = [f"rv:{s}" for s in steps] + [f"rvd:{s}" for s in steps]
    got = await client.hmget(keys.saga(record_id), fields)
    n = len(steps)
    for i, s in enumerate(steps):
        if got[i] is not None:
            return s
    for i, s in enumerate(steps):
        if got[n + i] is not None:
            return s
    return ""


async def load(
    client: Any, keys: Keys, record_id: str, steps: Sequence[str], step: str = ""
) -> ReviewView:
    step = step or await reviewed_step(client, keys, record_id, steps)
    if not step:
        raise StepConflictError(f"record {record_id!r} has no step flagged for review")
    read = await store.read_review(client, keys, record_id, step)
    made = _current(read)
    machine = read.original if made is not None and made.complete else read.output
    try:
        out = _OUT.decode(machine)
    except (msgspec.DecodeError, msgspec.ValidationError):
        raise StepConflictError(
            f"step {step!r} of record {record_id!r} has no values to review one by one; "
            "accept it whole (saga review accept)"
        ) from None
    found = rv.items(out, made)
    at = list(steps).index(step) if step in steps else -1
    nxt = steps[at + 1] if 0 <= at < len(steps) - 1 else ""
    return ReviewView(
        record_id=record_id, step=step, version=read.version, state=read.state,
        reason=read.flagged, complete=bool(made and made.complete), items=found,
        undecided=len(rv.undecided(found)), next_step=nxt,
    )  # fmt: skip


def _current(read: store.ReviewRead) -> rv.Decisions | None:
    """The decisions of this output: a set from before the step re-ran is not."""
    if not read.decisions:
        return None
    made = _MADE.decode(read.decisions)
    if made.complete and read.flagged:
        return None  # the step re-ran and flagged again: a new review
    if not made.complete and made.epoch != read.epoch:
        return None
    return made


async def decide(
    sm: StateMachine,
    record_id: str,
    steps: Sequence[str],
    item_id: str,
    kind: rv.Kind,
    *,
    actor: str,
    version: int | None = None,
    fix: rv.Fix | None = None,
    note: str = "",
    op: str | None = None,
) -> DecideResult:
    """One decision; ``version`` is the one the reviewer saw (None: the current one, for
    a script that reads and decides at once). ValueError for an unusable decision."""
    step = await reviewed_step(sm.client, sm.keys, record_id, steps)
    view = await load(sm.client, sm.keys, record_id, steps, step)
    if view.complete:
        raise StepConflictError(f"the review of record {record_id!r} is complete")
    read = await store.read_review(sm.client, sm.keys, record_id, view.step)
    made = _current(read) or rv.Decisions(epoch=read.epoch)
    item = _item(view, item_id, kind, made)
    if why := rv.allowed(item, kind):
        raise ValueError(why)
    decision = rv.decide(item, kind, actor, int(time.time() * 1000), fix, note)
    made = msgspec.structs.replace(made, decisions=[*made.decisions, decision])
    done = not rv.undecided(rv.items(_OUT.decode(read.output), made))
    made = msgspec.structs.replace(made, complete=done)
    at = list(steps).index(view.step)
    d = store.Decision(
        step=view.step,
        version=view.version if version is None else version,
        summary=f"{kind.value} {item.id}",
        decisions=msgspec.json.encode(made),
        event=msgspec.json.encode(decision),
        complete=done,
        reviewed=msgspec.json.encode(rv.reviewed_output(_OUT.decode(read.output), made))
        if done
        else b"",
        next_step=view.next_step,
        rerun=list(steps[at + 1 :]),
        kept=list(steps[: at + 1]),
    )
    got = await store.decide(sm, record_id, d, actor=actor, op=op)
    return DecideResult(record_id=record_id, item=item.id, kind=kind.value, version=got.version,
                        completed=done, rerun=view.next_step if done else "",
                        duplicate=got.duplicate)  # fmt: skip


def _item(view: ReviewView, item_id: str, kind: rv.Kind, made: rv.Decisions) -> rv.Item:
    if item_id == "new":
        if kind != rv.Kind.ADD:
            raise ValueError("only a missed value is added as item 'new'")
        n = sum(1 for d in made.decisions if d.item.startswith("a"))
        return rv.Item(id=f"a{n}", kind="new", value=None, provenance=None, flagged=False,
                       reasons=[])  # fmt: skip
    for i in view.items:
        if i.id == item_id:
            return i
    raise ValueError(f"the review of record {view.record_id!r} has no item {item_id!r}")
