"""Heavy imports a worker's steps need, done before it reports ready.

``import litellm`` costs seconds: paid by the first document of a freshly started (or
KEDA-scaled) worker it would hold that saga for as long. So a worker imports, before its
first read and while ``/readyz`` says ``warming up``, what its steps will need: litellm
when one of them may call a model (``calls_models``) and a model is configured, and the
modules each step declares (``warm=``). The imports run in a thread, so the event loop
keeps answering ``/livez`` and a SIGTERM meanwhile stops the worker at once. A worker
whose steps call no model never imports litellm.
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

import anyio
import structlog

from saga.api.pipeline import StepSpec
from saga.worker.health import HealthState

log = structlog.get_logger("saga.worker")


@runtime_checkable
class WarmablePorts(Protocol):
    """Ports that know what their model clients import before a first call."""

    def warm_up(self) -> tuple[str, ...]:
        """Import what a model call needs (blocking: runs in a thread); what it imported."""
        ...


def warm_modules(specs: Sequence[StepSpec]) -> tuple[str, ...]:
    """The modules ``specs`` declare with ``warm=``, each once, in declaration order."""
    return tuple(dict.fromkeys(m for s in specs for m in s.warm))


def warm_plan(specs: Sequence[StepSpec], ports: object) -> list[Callable[[], object]]:
    """What to run before ready: the ports' model imports when a step may call a
    model, then each declared module's import."""
    plan: list[Callable[[], object]] = []
    if isinstance(ports, WarmablePorts) and any(s.calls_models for s in specs):
        plan.append(ports.warm_up)
    plan.extend(_importer(m) for m in warm_modules(specs))
    return plan


def _importer(module: str) -> Callable[[], object]:
    return lambda: importlib.import_module(module)


async def warm_up(plan: Sequence[Callable[[], object]], worker: str) -> None:
    """Run ``plan`` in a thread (a cancel, such as a SIGTERM's, returns at once and
    leaves the import to finish on its own). A failed import is logged, not raised:
    the step's first attempt then meets it and retries as any failure."""
    if not plan:
        return
    started = time.monotonic()
    for job in plan:
        try:
            await anyio.to_thread.run_sync(job, abandon_on_cancel=True)
        except Exception as exc:  # an ImportError of a step's own module, say
            log.warning("warm_up_failed", worker=worker, error=type(exc).__name__)
    log.info("warmed_up", worker=worker, duration_seconds=round(time.monotonic() - started, 3))


async def warm_before_ready(
    plan: Sequence[Callable[[], object]], worker: str, health: HealthState, stopping: anyio.Event
) -> bool:
    """``warm_up`` with ``/readyz`` saying ``warming up``; False if ``stopping`` came first."""
    if not plan:
        return True
    health.warming = True
    async with anyio.create_task_group() as tg:

        async def cancel_on_stop() -> None:
            await stopping.wait()
            tg.cancel_scope.cancel()

        tg.start_soon(cancel_on_stop)
        await warm_up(plan, worker)
        tg.cancel_scope.cancel()
    health.warming = False
    return not stopping.is_set()
