"""One ``@app.step`` as written (``Declared``), what can be checked of it at once, and
the ``StepSpec`` it becomes when the app is built (``saga.api.app``)."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from saga.api.app_io import check_compensate_types, io_types
from saga.api.app_maps import MapSpec
from saga.api.app_waits import wait_step
from saga.api.pipeline import (
    MAX_STEP_VERSION,
    AppError,
    CompensateFn,
    StepSpec,
    WaitSpec,
    check_compensate,
)
from saga.state.errors import InvalidIdError
from saga.state.ids import validate_step

After = str | Callable[..., Any] | None | list[str | Callable[..., Any]]


@dataclass(frozen=True, slots=True)
class Declared:
    """One ``@app.step`` as written; turned into a ``StepSpec`` when the app is built."""

    name: str
    fn: Callable[..., Any]
    after: After
    retries: int | None
    timeout: float | None
    lease: float | None
    concurrency: int | None
    backoff: float | None
    compensate: CompensateFn | None
    loads_pages: bool
    deletes_pages: bool
    calls_models: bool = True
    warm: tuple[str, ...] = ()
    wait: WaitSpec | None = None
    """A wait step (``saga.api.app_waits``): ``fn`` is the signal's data type (a sleep: None)."""
    version: int = 1
    reads: tuple[str, ...] = ()
    map: MapSpec | None = None  # a map step (saga.api.app_maps): fn runs once per item


def check(d: Declared) -> None:
    """What can be told at once, before the app is built: the name, async, the numbers."""
    step = d.name
    try:
        validate_step(step)
    except InvalidIdError as exc:
        raise AppError(f"{exc}; name it with @app.step(name=...)") from None
    if not inspect.iscoroutinefunction(d.fn):
        raise AppError(f"step {step!r} must be an async function `async def {step}(ctx, inp)`")
    for label, value in (("timeout", d.timeout), ("lease", d.lease), ("backoff", d.backoff)):
        if value is not None and not value > 0:
            raise AppError(f"step {step!r}: {label}= must be more than 0 seconds, not {value!r}")
    if d.concurrency is not None and d.concurrency < 1:
        raise AppError(f"step {step!r}: concurrency= must be at least 1, not {d.concurrency!r}")
    if isinstance(d.version, bool) or not isinstance(d.version, int) or d.version < 1:
        raise AppError(f"step {step!r}: version= must be a whole number from 1, not {d.version!r}")
    if d.version > MAX_STEP_VERSION:
        raise AppError(f"step {step!r}: version= must be at most {MAX_STEP_VERSION}")
    if d.retries is not None and d.retries < 0:
        raise AppError(f"step {step!r}: retries= must be 0 or more, not {d.retries!r}")
    if d.compensate is not None:
        check_compensate(step, d.compensate)


def spec_of(d: Declared, edges: dict[str, tuple[str, ...]]) -> StepSpec:
    if d.wait is not None:
        return wait_step(d.name, d.fn, d.wait)
    input_type, output_type = io_types(d.name, d.fn)
    if d.compensate is not None:
        check_compensate_types(d.name, d.compensate, input_type, output_type)
    base = StepSpec(name=d.name, fn=d.fn, input_type=input_type, output_type=output_type)
    retry = base.retry
    if d.retries is not None:
        retry = replace(retry, max_attempts=d.retries + 1)
    if d.backoff is not None:
        retry = replace(retry, base_s=float(d.backoff))
    return replace(
        base,
        retry=retry,
        timeout_s=float(d.timeout or base.timeout_s),
        lease_s=float(d.lease or base.lease_s),
        concurrency=d.concurrency or base.concurrency,
        loads_pages=d.loads_pages,
        deletes_pages=d.deletes_pages,
        compensate=d.compensate,
        calls_models=d.calls_models,
        warm=d.warm,
        version=d.version,
        reads=d.reads,
        map=replace(d.map, over=edges[d.name][0]) if d.map is not None else None,
    )
