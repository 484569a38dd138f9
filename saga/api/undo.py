"""Compensations run as steps: ``undo:<step>`` is a pseudo-step with its own streams,
attempts, retries, dead letters and history rows, run by the workers of ``<step>``.

A saga that fails for good (or that an operator cancels with ``--compensate``) enters
``compensating``: the steps that committed and have a compensation are undone latest
first, each undo claimed with a lease and fencing token like any attempt. The plan is
fixed in Redis when compensation begins (``compensate_saga.lua``); each undo's claim
says what is left of it, so its commit names the next undo (``next_undo``).

A map step with a compensation is undone item by item: the plan holds ``<map>[<i>]`` for
each item that committed (``state/lua/includes/undo_plan.lua``); ``undo:<map>`` runs once
per entry with the item's input (element i of the over= step's list), its output and the
key the item ran under (``<record>:<map>:<i>:e<epoch>``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import msgspec

from saga.api.pipeline import StepSpec
from saga.state.model import Claim, undo_of, undone_step
from saga.steps.errors import InvalidInputError


class Undone(msgspec.Struct, frozen=True):
    """What an undo attempt commits (the undone step's output is dropped)."""


def undo_spec(spec: StepSpec) -> StepSpec:
    """The pseudo-step that runs ``spec.compensate``: the step's retry policy, timeout,
    lease and concurrency; its input, committed output and idempotency key decoded from
    the claim (``claim_undo.lua``)."""
    compensate = spec.compensate
    if compensate is None:
        raise ValueError(f"step {spec.name!r} has no compensation")

    out_type = spec.map.item_output if spec.map is not None else spec.output_type

    async def run(ctx: Any, _raw: Any) -> Undone:
        claim: Claim = ctx.claim
        item = undone_item(claim)
        try:
            raw = claim.input or b"{}"
            if item >= 0:  # the item's element of the over= step's list
                items = msgspec.json.decode(raw, type=list[msgspec.Raw])
                raw = bytes(items[item]) if item < len(items) else b"null"
            inp: Any = msgspec.json.decode(raw, type=spec.input_type)
            out: Any = msgspec.json.decode(claim.extra.get("output") or b"{}", type=out_type)
        except msgspec.DecodeError as exc:
            raise InvalidInputError(f"undo of step {spec.name!r}: {exc}") from None
        await compensate(ctx, inp, out, step_key(claim))
        return Undone()

    return replace(
        spec,
        name=undo_of(spec.name),
        fn=run,
        input_type=msgspec.Raw,
        output_type=Undone,
        compensate=None,
        loads_pages=False,
        deletes_pages=False,
        previous_output=False,
        map=None,
    )


def step_key(claim: Claim) -> str:
    """The idempotency key the undone step (or item) ran with: its commit's epoch, not
    the undo's."""
    epoch = (claim.extra.get("done") or b"").split(b":", 1)[0].decode() or str(claim.epoch)
    item = undone_item(claim)
    if item >= 0:
        return f"{claim.record_id}:{undone_step(claim.step)}:{item}:e{epoch}"
    return f"{claim.record_id}:{undone_step(claim.step)}:e{epoch}"


def plan_entry(entry: str) -> tuple[str, int]:
    """A compensation plan's entry: the step, and the item of a map's (-1 for a step)."""
    step, bracket, rest = entry.partition("[")
    if bracket and rest.endswith("]") and rest[:-1].isdigit():
        return step, int(rest[:-1])
    return entry, -1


def undone_item(claim: Claim) -> int:
    """The map item an undo's claim undoes (the head of its plan), -1 for a step."""
    head = (claim.extra.get("undo") or b"").decode().split(",", 1)[0]
    return plan_entry(head)[1]


def next_undo(claim: Claim) -> str:
    """The undo after this one in the plan the claim read ("" when it is the last)."""
    later = (claim.extra.get("undo") or b"").decode().split(",")[1:]
    return undo_of(plan_entry(later[0])[0]) if later and later[0] else ""
