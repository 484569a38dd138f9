"""The executor's side of compensations (the ``undo:<step>`` pseudo-step itself is
saga/api/undo.py): a step's worker serves the step's undo too, and a claim that
dead-letters a saga hands the saga on to compensation (in the claim script itself)."""

from __future__ import annotations

from collections.abc import Sequence

from saga.api.pipeline import Pipeline, StepSpec
from saga.api.undo import undo_spec
from saga.state.model import is_undo, undone_step


def with_undos(specs: Sequence[StepSpec]) -> list[StepSpec]:
    """``specs`` and the undo of each that has a compensation: a step's worker runs its
    compensation too (the same code, deployment, secrets)."""
    return [*specs, *(undo_spec(s) for s in specs if s.compensate is not None)]


def previous_steps(pipeline: Pipeline, specs: Sequence[StepSpec]) -> dict[str, str]:
    """The step whose output each of ``specs`` takes as input (``Pipeline.claim_guess``:
    a lane's is marked); an undo's is that of the step it undoes."""
    return {
        s.name: pipeline.prev_of(undone_step(s.name))
        if is_undo(s.name)
        else pipeline.claim_guess(s.name)
        for s in specs
    }


class UndoHandoff:
    """Hands a saga a claim dead-letters on to compensation; ``undoable`` is the
    pipeline's steps with a compensation, latest first (``Pipeline.undoable()``)."""

    def __init__(self, undoable: Sequence[str]) -> None:
        self.undoable = tuple(undoable)[:32]

    def for_claim(self, step: str) -> tuple[str, ...]:
        """The steps a claim of ``step`` names to undo: a saga it dead-letters for its
        lease expiries enters compensation in the same script (``claim_steps.lua``), as
        fail_step's dead path does, so no worker killed in between can leave it failed.
        None for an undo (its own dead letter ends compensation) or a pipeline without
        compensations."""
        return () if is_undo(step) else self.undoable
