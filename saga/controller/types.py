"""The controller's work per saga type: every type in the registry of types
(``saga.state.types``) gets its own promoter, requeuer and stream upkeep, so retries and
stranded entries of a type whose workers are all scaled to zero are moved back too.

The controller's own type (this deployment's pipeline) uses its step specs; another
type has only its registered step names, so its lease is the controller's
``SAGA_<STEP>_LEASE`` or the default. A lease guessed short only requeues early: the
``requeue_idle`` script refuses an entry whose saga a live lease still holds.

A step with a compensation brings its undo step (``undo:<step>``: own streams, run by
the step's workers) with the step's lease: with those workers scaled to zero, only the
controller promotes its due retries and requeues its stranded entries.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from saga.api.pipeline import StepSpec
from saga.config.settings import Settings
from saga.controller.requeue import Requeuer
from saga.state import streams
from saga.state.keys import Keys
from saga.state.machine import StateMachine
from saga.state.model import undo_of
from saga.state.types import TypeInfo
from saga.worker.fairness import user_caps
from saga.worker.health import HealthState
from saga.worker.upkeep import Upkeep

DEFAULT_LEASE_S = 60.0
"""``StepSpec.lease_s``'s default, for a registered step with no SAGA_<STEP>_LEASE here."""


class StepLease(NamedTuple):
    """What the controller needs of a step it has no code for."""

    name: str
    lease_s: float


@dataclass
class TypeWork:
    """One saga type's share of the controller."""

    keys: Keys
    steps: tuple[str, ...]
    upkeep: Upkeep
    requeuer: Requeuer

    @property
    def saga_type(self) -> str:
        return self.keys.saga_type


def type_work(
    client: Any,
    keys: Keys,
    settings: Settings,
    specs: Sequence[StepSpec | StepLease],
    name: str,
    health: HealthState,
) -> TypeWork:
    sm = StateMachine(client, keys, settings.limits)
    sm.user_caps = user_caps(settings, specs)  # its release pass honours them
    return TypeWork(
        keys=keys,
        steps=tuple(s.name for s in specs),
        upkeep=Upkeep(
            sm,
            specs,
            name,
            health,
            sweep=settings.retention_sweep,
            archive_dir=settings.archive_dir,
        ),
        requeuer=Requeuer(sm, specs, settings.recovery_interval_s),
    )


def leases_of(info: TypeInfo, settings: Settings) -> list[StepLease]:
    """A registered type's steps, then its undo steps (``info.undoable``, in pipeline
    order), with the lease this controller assumes for each (an undo: its step's)."""
    leases = {step: settings.for_step(step).lease_s or DEFAULT_LEASE_S for step in info.steps}
    undos = [step for step in info.steps if step in info.undoable]
    return [StepLease(step, lease) for step, lease in leases.items()] + [
        StepLease(undo_of(step), leases[step]) for step in undos
    ]


def with_undos(specs: Sequence[StepSpec]) -> list[StepSpec]:
    """This deployment's steps, then the undo step of each that has a compensation (as
    its workers serve them: ``Executor.specs``)."""
    from saga.api.undo import undo_spec

    return [*specs, *(undo_spec(s) for s in specs if s.compensate is not None)]


async def prepared(client: Any, work: TypeWork) -> TypeWork:
    """``work`` with its type's consumer groups in place (at ID 0; a no-op when present)."""
    await streams.ensure_groups(client, work.keys, list(work.steps))
    return work
