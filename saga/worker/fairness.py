"""The per-user in-flight cap of each step (``SAGA_USER_MAX_INFLIGHT``, per step
``SAGA_<STEP>_USER_MAX_INFLIGHT``): what the claim, commit, fail and release scripts are
told, and what a worker does with slots the cap leaves idle. 0 is no cap; the scripts
then leave the cap's keys alone."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from saga.config.settings import Settings

if TYPE_CHECKING:
    from saga.state.machine import StateMachine


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
        if getattr(spec, "wait", None) is not None:
            continue  # a wait step holds no worker: parking it takes no slot to hand on
        own = settings.for_step(spec.name).user_max_inflight
        cap = settings.user_max_inflight if own is None else own
        if cap > 0:
            caps[spec.name] = (cap, int(spec.lease_s * 1000))
    return caps


async def release_idle(sm: StateMachine, step: str, room: int) -> None:
    """A short read of ``step``: nothing else waits in the streams, so deferred entries of
    users at their cap may use the ``room`` idle slots (the cap only orders work, it
    wastes none)."""
    cap, lease_ms = sm.user_caps[step]
    for p in sm.keys.all_partitions():
        room -= await sm.release_deferred(step, p, cap=cap, lease_ms=lease_ms, most=room, idle=True)
        if room <= 0:
            break
