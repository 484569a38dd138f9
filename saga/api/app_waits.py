"""Wait steps of a ``saga.App``: ``@app.wait`` (for a signal), ``app.sleep`` (a
durable timer) and ``app.review_gate`` (a person's review of a flagged saga). None
runs user code: the worker that claims one parks the saga in
Redis (state ``waiting``, no worker held), and a signal or the timer sweep moves it on
(``saga.state.signals``).

::

    @app.wait(event="approved", after=draft, timeout=86400, on_timeout="default",
              default={"by": "nobody"})
    class Approval(msgspec.Struct):
        by: str

    @app.step(after=Approval)            # takes the signal's data
    async def publish(ctx, a: Approval) -> Published: ...

    cool_off = app.sleep("cool_off", after=publish, seconds=3600)  # input passed through
"""

from __future__ import annotations

import inspect
from dataclasses import replace
from typing import Any

import msgspec

from saga.api.pipeline import AppError, StepSpec, WaitSpec
from saga.state.errors import InvalidIdError
from saga.state.ids import validate_step

ON_TIMEOUT = ("fail", "compensate", "default")


async def parked(ctx: Any, inp: Any) -> Any:  # pragma: no cover - never called
    """The ``fn`` of a wait step: the worker parks the saga instead of calling it."""
    raise AssertionError("a wait step runs no code")


def wait_spec(
    owner: str,
    *,
    event: str,
    data: type,
    timeout: float | None,
    on_timeout: str,
    default: object,
) -> WaitSpec:
    """The checked WaitSpec of ``@app.wait`` on the Struct ``data``; AppError says why not."""
    if not (inspect.isclass(data) and issubclass(data, msgspec.Struct)):
        raise AppError(
            f"@app.wait(event={event!r}) decorates the signal's data type, a msgspec Struct "
            f"(`class Approval(msgspec.Struct): ...`), not {data!r}"
        )
    try:
        validate_step(event)
    except InvalidIdError:
        raise AppError(
            f"{owner}: event {event!r} must be a lowercase identifier (like a step name)"
        ) from None
    _check_timeout(owner, timeout)
    if on_timeout not in ON_TIMEOUT:
        raise AppError(f"{owner}: on_timeout={on_timeout!r} must be one of {', '.join(ON_TIMEOUT)}")
    if on_timeout != "fail" and timeout is None:
        raise AppError(f"{owner}: on_timeout={on_timeout!r} needs a timeout= in seconds")
    encoded = b""
    if on_timeout == "default":
        try:  # the fields of the class being decorated (it does not exist yet) or one
            value = default if isinstance(default, data) else msgspec.convert(default, data)
        except (msgspec.ValidationError, TypeError) as exc:
            raise AppError(
                f"{owner}: on_timeout='default' needs default= the fields of a "
                f"{data.__name__} (the data the next step gets when no signal came): {exc}"
            ) from None
        encoded = msgspec.json.encode(value)
    elif default is not None:
        raise AppError(f"{owner}: default= is used only with on_timeout='default'")
    return WaitSpec(event=event, timeout_s=timeout, on_timeout=on_timeout, default=encoded)


def sleep_spec(owner: str, *, seconds: float | None, until_field: str) -> WaitSpec:
    """The checked WaitSpec of ``app.sleep``: a fixed time, or a time the input carries."""
    if (seconds is None) == (not until_field):
        raise AppError(
            f"{owner}: give app.sleep either seconds= or until= (the input field holding "
            "the time to wake, in epoch seconds), not both or neither"
        )
    _check_timeout(owner, seconds)
    return WaitSpec(event="", timeout_s=seconds, on_timeout="continue", until_field=until_field)


GATE_ON_TIMEOUT = ("fail", "compensate", "continue")


def gate_spec(owner: str, *, timeout: float | None, on_timeout: str) -> WaitSpec:
    """The checked WaitSpec of ``app.review_gate``: no event; a flagged saga waits for a
    person, and its timer (if any) fails it, compensates it, or lets it on unreviewed."""
    _check_timeout(owner, timeout)
    if on_timeout not in GATE_ON_TIMEOUT:
        raise AppError(
            f"{owner}: on_timeout={on_timeout!r} must be one of {', '.join(GATE_ON_TIMEOUT)}"
        )
    if on_timeout != "fail" and timeout is None:
        raise AppError(f"{owner}: on_timeout={on_timeout!r} needs a timeout= in seconds")
    return WaitSpec(event="", timeout_s=timeout, on_timeout=on_timeout, gate=True)


def sleep_at_spec(owner: str, at: Any) -> WaitSpec:
    """The checked WaitSpec of ``app.sleep_until``: ``at`` maps the input to a time."""
    if not callable(at):
        raise AppError(f"{owner}: at= must be a function of the input giving the time to wake")
    return WaitSpec(event="", on_timeout="continue", at=at)


def _check_timeout(owner: str, value: float | None) -> None:
    if value is not None and not (isinstance(value, int | float) and value > 0):
        raise AppError(f"{owner}: the time must be more than 0 seconds, not {value!r}")


def wait_step(name: str, fn: Any, wait: WaitSpec) -> StepSpec:
    """The StepSpec of a wait step: it runs no code, takes anything, and gives the
    signal's data (``fn`` is the data type); a sleep's output is set by settle_waits."""
    out = fn if isinstance(fn, type) else msgspec.Raw
    return StepSpec(name=name, fn=parked, input_type=msgspec.Raw, output_type=out,
                    wait=wait, calls_models=False)  # fmt: skip


def settle_waits(specs: list[StepSpec]) -> list[StepSpec]:
    """The chain with each sleep's output type its input's (it passes it through);
    AppError for a wait that is the last step or a sleep that is the first."""
    out = list(specs)
    for i, spec in enumerate(out):
        if spec.wait is None:
            continue
        if i + 1 == len(out):
            raise AppError(f"wait {spec.name!r} is the last step; declare the step after it")
        if spec.wait.on_timeout == "continue" or spec.wait.gate:
            if i == 0:
                kind = "review gate" if spec.wait.gate else "sleep"
                raise AppError(f"{kind} {spec.name!r} cannot be the first step")
            out[i] = replace(spec, output_type=out[i - 1].output_type)
    return out
