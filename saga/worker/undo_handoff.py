"""The executor's side of compensations (the ``undo:<step>`` pseudo-step itself is
saga/undo.py): a step's worker serves the step's undo too, and a claim that
dead-letters a saga hands the saga on to compensation."""

from __future__ import annotations

from collections.abc import Sequence

import structlog

from saga.pipeline import Pipeline, StepSpec
from saga.state import operator
from saga.state.errors import StateError
from saga.state.machine import StateMachine
from saga.state.model import is_undo, undone_step
from saga.undo import undo_spec

log = structlog.get_logger("saga.worker")


def with_undos(specs: Sequence[StepSpec]) -> list[StepSpec]:
    """``specs`` and the undo of each that has a compensation: a step's worker runs its
    compensation too (the same code, deployment, secrets)."""
    return [*specs, *(undo_spec(s) for s in specs if s.compensate is not None)]


def previous_steps(pipeline: Pipeline, specs: Sequence[StepSpec]) -> dict[str, str]:
    """The step whose output each of ``specs`` takes as input; an undo's is that of the
    step it undoes."""
    return {s.name: pipeline.prev_of(undone_step(s.name)) for s in specs}


class UndoHandoff:
    """Starts compensation for a saga a claim dead-lettered; ``undoable`` is the
    pipeline's steps with a compensation, latest first (``Pipeline.undoable()``)."""

    def __init__(self, sm: StateMachine, undoable: Sequence[str], worker: str) -> None:
        self.sm, self.undoable, self.worker = sm, tuple(undoable), worker

    async def dead_lettered(self, step: str, record_id: str) -> None:
        """A claim of ``step`` dead-lettered the saga (its leases kept expiring): undo what
        it committed. A second call, so a worker killed right here leaves it failed, for
        ``saga cancel --compensate`` (fail_step's dead path has no such gap). An undo's
        own dead letter ends compensation, and nothing is undone without compensations."""
        if not self.undoable or is_undo(step):
            return
        try:
            res = await operator.compensate(
                self.sm, record_id, self.undoable, actor=f"worker {self.worker}"
            )
        except StateError as exc:  # moved on meanwhile (an operator acted): theirs to say
            log.warning("compensation_not_started", record_id=record_id, error=str(exc))
            return
        log.info("compensation_started", record_id=record_id, state=res.state, step=res.step)
