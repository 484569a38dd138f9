"""Running one attempt: decode input, run the step under a timeout with lease
heartbeats, then commit or fail it through the committer."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

import anyio
import msgspec
import structlog

from saga.pipeline import Pipeline, StepSpec
from saga.retry import decide
from saga.settings import Settings
from saga.state.codes import RC
from saga.state.connection import TRANSIENT_ERRORS
from saga.state.errors import LeaseLostError
from saga.state.machine import CommitRequest, FailRequest, Outcome, StateMachine
from saga.state.model import Claim, FailAction
from saga.steps.errors import InvalidInputError, PayloadTooLargeError, StepTimeoutError
from saga.telemetry import tracing
from saga.telemetry.redact import safe_error
from saga.telemetry.scope import log_scope
from saga.worker.committer import Committer
from saga.worker.context import AttemptContext
from saga.worker.observer import Observer
from saga.worker.ports import Ports

log = structlog.get_logger("saga.worker")


@dataclass
class AttemptRunner:
    """Shared by every attempt of one executor."""

    sm: StateMachine
    pipeline: Pipeline
    settings: Settings
    committer: Committer
    ports: Ports
    worker: str
    observer: Observer

    async def run(self, spec: StepSpec, claim: Claim) -> Outcome | None:
        """Run and finish one attempt. Returns None when the attempt was fenced
        mid-step or cancelled by a drain (then nothing is acknowledged).

        The attempt is a span (``process <step>``) in the saga's trace; every log
        line in its scope, the adapters' too, carries the ids below."""
        with tracing.attempt_span(claim, self.sm.keys, self.worker) as span:
            ids = {
                "record_id": claim.record_id,
                "user_id": claim.user_id,
                "step": claim.step,
                "attempt": claim.attempt,
                "epoch": claim.epoch,
                "worker": self.worker,
                "trace_id": span.trace_id or tracing.trace_id_of(claim.trace),
                "span_id": span.span_id,
            }
            with log_scope(ids):
                outcome = await self._attempt(spec, claim, log.bind(**ids))
            if outcome is None:
                span.set("saga.outcome", "fenced")
            return outcome

    async def _attempt(self, spec: StepSpec, claim: Claim, bound: Any) -> Outcome | None:
        # Claims are in the saga's history already; at info this line doubled the
        # logging cost of every transition (measured by saga bench).
        bound.debug("step_claimed", lease_until_ms=claim.lease_until_ms)
        attempt_ports = self.ports.for_attempt(claim)
        lease_lost = anyio.Event()
        started = time.monotonic()

        async def heartbeat() -> None:
            await self.sm.heartbeat(claim, worker=self.worker, lease_ms=int(spec.lease_s * 1000))

        ctx = AttemptContext(
            claim=claim,
            log=bound,
            documents=self.ports.documents,
            llm=attempt_ports.llm,
            config=self.settings.step_config,
            _heartbeat=heartbeat,
        )
        req: CommitRequest | FailRequest
        # One scope for both ends of a step: its timeout (the deadline) and a lost
        # lease (a heartbeat cancels it). A drain cancels from outside and leaves it.
        deadline = anyio.current_time() + spec.timeout_s
        with anyio.CancelScope(deadline=deadline) as scope:
            try:
                output = await self._execute(spec, ctx, scope, lease_lost, heartbeat)
                req = self._commit_request(spec, ctx, output)
            except Exception as exc:  # the step failed: decide what happens next
                req = self._fail_request(spec, claim, exc)
        if scope.cancelled_caught:
            if lease_lost.is_set():
                bound.warning("lease_lost", duration_seconds=time.monotonic() - started)
                self.observer.fenced(spec.name)
                return None
            req = self._fail_request(spec, claim, _timed_out(spec))
        usd, tokens = attempt_ports.cost()
        cost_keys = tuple(attempt_ports.cost_keys())
        req = msgspec.structs.replace(
            req, cost=usd, tokens=tokens, cost_keys=cost_keys, worker=self.worker
        )
        outcome = await self.committer.submit(claim, req)
        paid = attempt_ports.paid()  # spend as the provider sees it, for logs and metrics
        self._report(bound, spec, claim, req, outcome, time.monotonic() - started, paid, tokens)
        return outcome

    async def _execute(
        self,
        spec: StepSpec,
        ctx: AttemptContext,
        scope: anyio.CancelScope,
        lease_lost: anyio.Event,
        heartbeat: Any,
    ) -> bytes:
        try:
            inp: Any = msgspec.json.decode(ctx.claim.input or b"{}", type=spec.input_type)
        except msgspec.DecodeError as exc:  # ValidationError is a DecodeError too
            raise InvalidInputError(f"input of step {spec.name!r} is invalid: {exc}") from None
        error: Exception | None = None
        result: Any = None
        beats = _LazyHeartbeats(
            spec.lease_s / 3, lambda: self._heartbeats(spec, ctx, scope, lease_lost, heartbeat)
        )
        try:
            result = await spec.fn(ctx, inp)  # under the attempt's deadline (see _attempt)
        except TimeoutError:
            error = _timed_out(spec)
        except Exception as exc:
            error = exc
        finally:
            beats.stop()
        error = error or beats.error
        if error is not None:
            raise error
        output = msgspec.json.encode(result)
        limit = self.settings.step_config.max_output_bytes
        if len(output) > limit:
            raise PayloadTooLargeError(f"output of step {spec.name!r} (bytes)", len(output), limit)
        return output

    async def _heartbeats(
        self,
        spec: StepSpec,
        ctx: AttemptContext,
        scope: anyio.CancelScope,
        lease_lost: anyio.Event,
        heartbeat: Any,
    ) -> None:
        """Renew the lease now and every third of it; a stale token stops the step at once."""
        while True:
            try:
                await heartbeat()
            except LeaseLostError:
                lease_lost.set()
                scope.cancel()
                return
            except TRANSIENT_ERRORS as exc:
                ctx.log.warning("heartbeat_failed", error=type(exc).__name__)
            await anyio.sleep(spec.lease_s / 3)

    def _commit_request(self, spec: StepSpec, ctx: AttemptContext, output: bytes) -> CommitRequest:
        return CommitRequest(
            output=output,
            next_step=self.pipeline.next_of(spec.name),
            pages=ctx.staged_pages,
            delete_pages=spec.deletes_pages,
        )

    def _fail_request(self, spec: StepSpec, claim: Claim, exc: Exception) -> FailRequest:
        d = decide(exc, claim.attempt, spec.retry, now=time.time())
        return FailRequest(
            action=d.action,
            delay_ms=d.delay_ms,
            error_class=d.error_class,
            error_message=safe_error(exc, d.message),
        )

    def _report(
        self,
        bound: Any,
        spec: StepSpec,
        claim: Claim,
        req: CommitRequest | FailRequest,
        outcome: Outcome,
        duration: float,
        usd: float,
        tokens: int,
    ) -> None:
        if usd or tokens:
            self.observer.cost(spec.name, claim.user_id, usd, tokens)
        if outcome.code == RC.LEASE_LOST:
            bound.warning("lease_lost", duration_seconds=duration, state=outcome.state)
            self.observer.fenced(spec.name)
            tracing.annotate("fenced")
            return
        if isinstance(req, CommitRequest):
            bound.info(
                "step_committed",
                duration_seconds=round(duration, 6),
                next_step=req.next_step,
                cost_usd=usd,
                duplicate=outcome.code == RC.DUPLICATE,
            )
            self.observer.committed(spec.name, duration)
            tracing.annotate("duplicate" if outcome.code == RC.DUPLICATE else "committed")
            return
        event = {
            FailAction.RETRY: "retry_scheduled",
            FailAction.PARK: "step_parked",
            FailAction.DEAD: "dead_lettered",
        }[req.action]
        bound.warning(
            "step_failed",
            duration_seconds=round(duration, 6),
            error_class=req.error_class,
            error=req.error_message,
            action=req.action.value,
        )
        bound.info(event, delay_ms=req.delay_ms)
        self.observer.failed(spec.name, req.action.value, duration)
        tracing.annotate(req.action.value, req.error_class)


def _timed_out(spec: StepSpec) -> StepTimeoutError:
    return StepTimeoutError(f"step {spec.name!r} ran past its timeout of {spec.timeout_s:g}s")


_BEATING: set[asyncio.Task[None]] = set()


class _LazyHeartbeats:
    """Heartbeats of one attempt, started only if its step still runs after a third
    of its lease: most steps end sooner, and a timer costs ~1 µs where a task group
    with a heartbeat task costs ~50 µs per attempt.

    An error other than a lost lease or a transient one stops the heartbeats and is
    kept in ``error``; the attempt fails with it once the step returns.
    """

    __slots__ = ("_start", "_task", "_timer", "error")

    def __init__(self, delay: float, start: Callable[[], Coroutine[Any, Any, None]]) -> None:
        self._start = start
        self._task: asyncio.Task[None] | None = None
        self.error: Exception | None = None
        self._timer = asyncio.get_running_loop().call_later(delay, self._begin)

    def _begin(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())
        _BEATING.add(self._task)  # the loop holds tasks weakly
        self._task.add_done_callback(_BEATING.discard)

    async def _run(self) -> None:
        try:
            await self._start()
        except Exception as exc:
            self.error = exc

    def stop(self) -> None:
        self._timer.cancel()
        if self._task is not None:
            self._task.cancel()
