"""What a worker checks of its steps against the keyspace: the saga fields a claim reads
besides its input (the claim script's extra fields: one HMGET with the saga's own, no
round trip more), and, at start, sagas left at steps this release no longer has."""

from __future__ import annotations

from typing import Any

import structlog

from saga.api.pipeline import StepSpec
from saga.state.keys import Keys
from saga.state.model import is_undo
from saga.state.step_changes import refuse_stranded, removed_in_flight

log = structlog.get_logger("saga.worker")


async def refuse_removed_steps(client: Any, keys: Keys, steps: tuple[str, ...]) -> None:
    """Raise StepRemovedError if sagas wait at a step this release removed or renamed
    that no live worker serves; log those a live worker (of an older release) serves."""
    found = await removed_in_flight(client, keys, steps)
    refuse_stranded(keys.saga_type, found)
    for s in found:
        log.warning("removed_step_in_flight", step=s.step, waiting=s.waiting,
                    detail="served by a live worker of another release")  # fmt: skip


def claim_extras(spec: StepSpec, prev: dict[str, str], versioned: bool) -> tuple[str, ...]:
    """Its earlier output (``StepSpec.previous_output``), a join's parents' outputs and,
    in a pipeline with a versioned step (``Pipeline.versioned``), the version of the step
    before, which ``ctx.input_version`` reads (``sv:<step>``, written by that step's
    commit)."""
    extras: tuple[str, ...] = (f"out:{spec.name}",) if spec.previous_output else ()
    extras += tuple(f"out:{p}" for p in spec.joins)  # a join's input: its parents' outputs
    extras += tuple(f"out:{r}" for r in spec.reads if r not in spec.joins)
    before = prev.get(spec.name, "_input").lstrip("|")  # a lane's is marked (claim_guess)
    if versioned and before != "_input" and not is_undo(spec.name):
        extras += (f"sv:{before}",)
    return extras
