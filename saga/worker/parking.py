"""The end of a claimed attempt at a wait step: no code runs, the saga is parked
(``saga.state.signals.park``) with its event, its timer and its timeout's path."""

from __future__ import annotations

import math
import time
from datetime import datetime
from typing import TYPE_CHECKING, Any

import msgspec
import structlog

from saga.api.pipeline import StepSpec
from saga.state import signals
from saga.state.codes import RC
from saga.state.model import Claim, FailAction
from saga.state.requests import FailRequest, Outcome

if TYPE_CHECKING:
    from saga.worker.attempt import AttemptRunner

log = structlog.get_logger("saga.worker")


async def park_wait(runner: AttemptRunner, spec: StepSpec, claim: Claim) -> Outcome:
    """Park ``claim``'s saga at its wait step (or move it on with a kept signal)."""
    wait = spec.wait
    assert wait is not None
    started = time.monotonic()
    due_ms = after_ms = 0
    if wait.at is not None:
        try:
            due_ms = wake_ms(wait.at, msgspec.json.decode(claim.input, type=spec.output_type))
        except Exception as exc:  # the user's function: any error is its input's fault
            req = FailRequest(
                action=FailAction.DEAD,
                error_class="InvalidInputError",
                error_message=f"sleep {spec.name!r} could not tell its wake-up time from its "
                f"input: {type(exc).__name__}",
                worker=runner.worker,
            )
            return await runner.committer.submit(claim, req)
    elif wait.until_field:
        due_ms = wake_time(claim.input, wait.until_field)
        if due_ms < 0:
            req = FailRequest(
                action=FailAction.DEAD,
                error_class="InvalidInputError",
                error_message=f"sleep {spec.name!r} needs a number of epoch seconds in its "
                f"input field {wait.until_field!r}",
                worker=runner.worker,
            )
            return await runner.committer.submit(claim, req)
    elif wait.timeout_s is not None:
        after_ms = max(int(wait.timeout_s * 1000), 1)
    plan = signals.WaitPlan(
        event=wait.event,
        next_step=runner.pipeline.next_of(spec.name),
        due_ms=due_ms,
        after_ms=after_ms,
        on_timeout=wait.on_timeout,
        default=wait.default,
        undo=runner.pipeline.undoable() if wait.on_timeout == "compensate" else (),
        gate=wait.gate,
    )
    outcome = await signals.park(runner.sm, claim, plan, worker=runner.worker)
    if outcome.state == "waiting" and runner.on_timer is not None:
        runner.on_timer()
    if outcome.code == RC.LEASE_LOST:
        runner.observer.fenced(spec.name)
    elif outcome.code == RC.OK:
        runner.observer.committed(spec.name, time.monotonic() - started)
        log.info("saga_waiting" if outcome.state == "waiting" else "signal_consumed",
                 wait_event=wait.event, due_ms=outcome.detail)  # fmt: skip
    return outcome


def wake_time(payload: bytes, field: str) -> int:
    """The wake-up time (ms) in ``field`` of a JSON object, epoch seconds; -1 if none."""
    try:
        value = msgspec.json.decode(payload or b"{}").get(field)
    except (msgspec.DecodeError, AttributeError):
        return -1
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        return -1
    return max(int(value * 1000), 1)


def wake_ms(at: Any, value: Any) -> int:
    """``at(value)`` as epoch ms (at least 1); ValueError says why it is not a time."""
    when = at(value)
    if isinstance(when, datetime):
        if when.tzinfo is None:
            raise ValueError("it returned a naive datetime; give it a tzinfo (UTC)")
        when = when.timestamp()
    if isinstance(when, bool) or not isinstance(when, int | float) or not math.isfinite(when):
        raise ValueError(f"it returned {when!r}, not a datetime or epoch seconds")
    return max(int(when * 1000), 1)
