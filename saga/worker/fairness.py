"""The per-user in-flight cap of each step (``SAGA_USER_MAX_INFLIGHT``, per step
``SAGA_<STEP>_USER_MAX_INFLIGHT``): what the claim, commit, fail and release scripts are
told. 0 is no cap; the scripts then leave the cap's keys alone."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from saga.settings import Settings


class _Step(Protocol):
    """A step's name and lease (a StepSpec, or the controller's StepLease)."""

    @property
    def name(self) -> str: ...

    @property
    def lease_s(self) -> float: ...


def user_caps(settings: Settings, specs: Sequence[_Step]) -> dict[str, tuple[int, int]]:
    """Step -> (per-user cap, lease ms), for the steps that have a cap."""
    caps = {}
    for spec in specs:
        own = settings.for_step(spec.name).user_max_inflight
        cap = settings.user_max_inflight if own is None else own
        if cap > 0:
            caps[spec.name] = (cap, int(spec.lease_s * 1000))
    return caps
