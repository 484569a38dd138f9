"""The controller's work per saga type: every type in the registry of types
(``saga.state.types``) gets its own promoter, requeuer and stream upkeep, so retries and
stranded entries of a type whose workers are all scaled to zero are moved back too.

The controller's own type (this deployment's pipeline) uses its step specs; another
type has only its registered step names, so its lease is the controller's
``SAGA_<STEP>_LEASE`` or the default. A lease guessed short only requeues early: the
``requeue_idle`` script refuses an entry whose saga a live lease still holds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from saga.controller.requeue import Requeuer
from saga.pipeline import StepSpec
from saga.settings import Settings
from saga.state import streams
from saga.state.keys import Keys
from saga.state.machine import StateMachine
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
        upkeep=Upkeep(sm, specs, name, health),
        requeuer=Requeuer(sm, specs, settings.recovery_interval_s),
    )


def leases_of(info: TypeInfo, settings: Settings) -> list[StepLease]:
    """A registered type's steps with the lease this controller assumes for each."""
    return [
        StepLease(step, settings.for_step(step).lease_s or DEFAULT_LEASE_S) for step in info.steps
    ]


async def prepared(client: Any, work: TypeWork) -> TypeWork:
    """``work`` with its type's consumer groups in place (at ID 0; a no-op when present)."""
    await streams.ensure_groups(client, work.keys, list(work.steps))
    return work
