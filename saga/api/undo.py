"""Compensations run as steps: ``undo:<step>`` is a pseudo-step with its own streams,
attempts, retries, dead letters and history rows, run by the workers of ``<step>``.

A saga that fails for good (or that an operator cancels with ``--compensate``) enters
``compensating``: the steps that committed and have a compensation are undone latest
first, each undo claimed with a lease and fencing token like any attempt. The plan is
fixed in Redis when compensation begins (``compensate_saga.lua``); each undo's claim
says what is left of it, so its commit names the next undo (``next_undo``).
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

    async def run(ctx: Any, _raw: Any) -> Undone:
        claim: Claim = ctx.claim
        try:
            inp: Any = msgspec.json.decode(claim.input or b"{}", type=spec.input_type)
            out: Any = msgspec.json.decode(
                claim.extra.get("output") or b"{}", type=spec.output_type
            )
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
    )


def step_key(claim: Claim) -> str:
    """The idempotency key the undone step ran with: its commit's epoch, not the undo's."""
    epoch = (claim.extra.get("done") or b"").split(b":", 1)[0].decode() or str(claim.epoch)
    return f"{claim.record_id}:{undone_step(claim.step)}:e{epoch}"


def next_undo(claim: Claim) -> str:
    """The undo after this one in the plan the claim read ("" when it is the last)."""
    later = (claim.extra.get("undo") or b"").decode().split(",")[1:]
    return undo_of(later[0]) if later and later[0] else ""
