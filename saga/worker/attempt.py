"""Running one attempt: decode input, run the step under a timeout with lease
heartbeats, then commit or fail it through the committer."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import msgspec
import structlog
from redis.exceptions import ResponseError

from saga.api.pipeline import Pipeline, StepSpec, join_input
from saga.api.retry import decide
from saga.api.undo import next_undo
from saga.config.settings import Settings
from saga.state.codes import RC
from saga.state.connection import TRANSIENT_ERRORS
from saga.state.errors import LeaseLostError
from saga.state.lanes import is_route
from saga.state.machine import StateMachine
from saga.state.map_calls import extend_item
from saga.state.model import Claim, FailAction, SagaState, is_undo
from saga.state.requests import CommitRequest, FailRequest, Outcome
from saga.state.streams import group_missing
from saga.steps.errors import InvalidInputError, PayloadTooLargeError, StepTimeoutError
from saga.telemetry import tracing
from saga.telemetry.redact import error_detail_of, safe_error, without_references
from saga.telemetry.scope import log_scope
from saga.worker.committer import Committer
from saga.worker.context import AttemptContext, SeenDocuments
from saga.worker.observer import Observer
from saga.worker.parking import park_wait
from saga.worker.ports import Ports
from saga.worker.watchdog import Watchdog, Watched

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
    watchdog: Watchdog
    _next: dict[str, str] = field(default_factory=dict)
    _undoable: tuple[str, ...] | None = None
    on_timer: Callable[[], None] | None = None
    """Called when a commit or a park left the saga waiting on a timer (wakes the
    worker's timers loop, saga.worker.timers)."""

    def _next_of(self, step: str) -> str:
        """``pipeline.next_of``, memoized: it is asked on every commit."""
        found = self._next.get(step)
        if found is None:
            found = self._next[step] = self.pipeline.next_of(step)
        return found

    def _undo_steps(self) -> tuple[str, ...]:
        """``pipeline.undoable()``, memoized: a dead letter may start compensation."""
        if self._undoable is None:
            self._undoable = self.pipeline.undoable()
        return self._undoable

    async def run(self, spec: StepSpec, claim: Claim) -> Outcome | None:
        """Run and finish one attempt. Returns None when the attempt was fenced
        mid-step or cancelled by a drain (then nothing is acknowledged).

        The attempt is a span (``process <step>``) in the saga's trace; every log
        line in its scope, the adapters' and the step's own too, carries the ids below."""
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
            # One scope, no bound logger per attempt: binding cost ~3 µs a transition.
            with log_scope(ids):
                outcome = await self._attempt(spec, claim)
            if outcome is None:
                span.set("saga.outcome", "fenced")
            return outcome

    async def _attempt(self, spec: StepSpec, claim: Claim) -> Outcome | None:
        if spec.wait is not None:  # a wait step runs no code: it parks the saga
            return await park_wait(self, spec, claim)
        # The claim is in the saga hash (and its end event); at info this line doubled
        # the logging cost of every transition (measured by saga bench).
        log.debug("step_claimed", lease_until_ms=claim.lease_until_ms)
        attempt_ports = self.ports.for_attempt(claim)
        started = time.monotonic()

        async def heartbeat() -> None:
            if claim.item >= 0:  # a map's item holds its own lease (state/map_calls)
                await extend_item(self.sm, claim, worker=self.worker, lease_ms=lease_ms)
                return
            await self.sm.heartbeat(claim, worker=self.worker, lease_ms=lease_ms)

        lease_ms = int(spec.lease_s * 1000)

        ctx = AttemptContext(
            claim=claim,
            log=log,
            documents=SeenDocuments(self.ports.documents),
            llm=attempt_ports.llm,
            config=self.settings.step_config,
            _heartbeat=heartbeat,
            embedder=attempt_ports.embedder,
            step_version=spec.version,
        )
        req: CommitRequest | FailRequest
        # One asyncio timeout for both ends of a step, fired by the watchdog: the
        # deadline, or a lost lease (a heartbeat fires it at once). A drain cancels
        # the task from outside: that CancelledError is not ours and leaves through here.
        now = asyncio.get_running_loop().time()
        watched = Watched(
            now + spec.timeout_s,
            now + spec.lease_s / 3,
            lambda w: self._heartbeats(spec, w, heartbeat),
        )
        try:
            async with asyncio.timeout(None) as watched.timeout:
                self.watchdog.watch(watched)
                try:
                    output, review = await self._execute(spec, ctx, watched)
                    req = self._commit_request(spec, ctx, output, review)
                except Exception as exc:  # the step failed: decide what happens next
                    req = self._fail_request(spec, ctx, exc)
                finally:
                    self.watchdog.unwatch(watched)
        except TimeoutError:  # the deadline (or a lost lease) cancelled the step
            req = self._fail_request(spec, ctx, _timed_out(spec))
        if watched.lost:
            log.warning("lease_lost", duration_seconds=time.monotonic() - started)
            self.observer.fenced(spec.name)
            return None
        usd, tokens = attempt_ports.cost()
        cost_keys = attempt_ports.cost_keys()
        if usd or tokens or cost_keys:
            req = msgspec.structs.replace(req, cost=usd, tokens=tokens, cost_keys=tuple(cost_keys))
        outcome = await self.committer.submit(claim, req)
        if outcome.state == "waiting" and self.on_timer is not None:
            self.on_timer()  # run_next_at: its timer is in Redis now
        # What this finish billed in Redis, answers inherited from a killed attempt
        # included; a fenced finish bills nothing (the attempt holding the lease will).
        billed = attempt_ports.paid() if outcome.code != RC.LEASE_LOST else 0.0
        self._report(spec, claim, req, outcome, time.monotonic() - started, billed, tokens)
        return outcome

    async def _execute(
        self, spec: StepSpec, ctx: AttemptContext, watched: Watched
    ) -> tuple[bytes, str]:
        """The encoded output and its review reason (see ``review_reason``)."""
        try:
            raw = join_input(spec.joins, ctx.claim.extra) if spec.joins else ctx.claim.input
            inp: Any = msgspec.json.decode(raw or b"{}", type=spec.input_type)
        except msgspec.DecodeError as exc:  # ValidationError is a DecodeError too
            raise invalid_input(spec, exc) from None
        error: Exception | None = None
        result: Any = None
        try:
            result = await spec.fn(ctx, inp)  # under the attempt's deadline (see _attempt)
        except TimeoutError:  # the step's own (our deadline arrives as a cancellation)
            error = _timed_out(spec)
        except Exception as exc:
            error = exc
        finally:
            watched.stop()
        error = error or watched.error
        if error is not None:
            raise error
        output = msgspec.json.encode(result)
        limit = self.settings.step_config.max_output_bytes
        if len(output) > limit:
            raise PayloadTooLargeError(f"output of step {spec.name!r} (bytes)", len(output), limit)
        return output, review_reason(result)

    async def _heartbeats(self, spec: StepSpec, watched: Watched, heartbeat: Any) -> None:
        """Renew the lease now and every third of it; a stale token stops the step at once."""
        while True:
            try:
                await heartbeat()
            except LeaseLostError:
                watched.lose()
                return
            except TRANSIENT_ERRORS as exc:
                log.warning("heartbeat_failed", error=type(exc).__name__)
            except ResponseError as exc:
                if not group_missing(exc):
                    raise
                # The lease was extended; only the entry's XCLAIM found no group (the
                # read loop recreates it). Not the step's failure.
                log.warning("heartbeat_failed", error="NOGROUP")
            await asyncio.sleep(spec.lease_s / 3)

    def _commit_request(
        self, spec: StepSpec, ctx: AttemptContext, output: bytes, review: str
    ) -> CommitRequest:
        undo = is_undo(spec.name)
        return CommitRequest(
            output=output,
            review=review,
            next_step=next_undo(ctx.claim) if undo else self._next_of(spec.name),
            pages=ctx.staged_pages,
            delete_pages=spec.deletes_pages,
            worker=self.worker,
            step_version=spec.version,
            run_at_ms=ctx.run_at_ms,
            run_after_ms=ctx.run_after_ms,
        )

    def _fail_request(self, spec: StepSpec, ctx: AttemptContext, exc: Exception) -> FailRequest:
        # Attempts that ended by lease expiry have their own budget (the claim's).
        d = decide(exc, ctx.claim.charged, spec.retry, now=time.time())
        undo: tuple[str, ...] = ()
        if d.action == FailAction.DEAD and not is_undo(spec.name):
            undo = self._undo_steps()  # a committed one among them: compensating
        return FailRequest(
            action=d.action,
            delay_ms=d.delay_ms,
            error_class=d.error_class,
            # the message, shown to anyone, without any document reference the attempt
            # handled; the detail (sealed, for operators) says everything
            error_message=without_references(safe_error(exc, d.message), ctx.references),
            error_detail=error_detail_of(exc, ctx.references) if self.sm.keys.sealer else "",
            worker=self.worker,
            undo=undo,
            step_version=spec.version,
        )

    def _report(
        self,
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
            log.warning("lease_lost", duration_seconds=duration, state=outcome.state)
            self.observer.fenced(spec.name)
            tracing.annotate("fenced")
            return
        if isinstance(req, CommitRequest):
            log.info(
                "step_committed",
                duration_seconds=round(duration, 6),
                next_step=outcome.detail if is_route(req.next_step) else req.next_step,
                cost_usd=usd,
                duplicate=outcome.code == RC.DUPLICATE,
            )
            self.observer.committed(spec.name, duration)
            if req.review and outcome.code == RC.OK:
                log.warning("flagged_for_review", reason=req.review)
                self.observer.flagged(spec.name)
            if not req.next_step and outcome.code == RC.OK:
                self.observer.saga_ended(outcome.state, _since(claim.created_ms))
            tracing.annotate("duplicate" if outcome.code == RC.DUPLICATE else "committed")
            return
        event = {
            FailAction.RETRY: "retry_scheduled",
            FailAction.PARK: "step_parked",
            FailAction.DEAD: "dead_lettered",
        }[req.action]
        log.warning(
            "step_failed",
            duration_seconds=round(duration, 6),
            error_class=req.error_class,
            error=req.error_message,
            action=req.action.value,
        )
        log.info(event, delay_ms=req.delay_ms)
        self.observer.failed(spec.name, req.action.value, duration)
        self.observer.error(spec.name, req.error_class)
        if req.action == FailAction.DEAD and outcome.code == RC.OK:
            if outcome.state == SagaState.COMPENSATING:
                log.info("compensation_started", next_step=outcome.detail)
            else:  # failed, or compensation_failed (an undo's dead letter)
                self.observer.saga_ended(outcome.state, _since(claim.created_ms))
        tracing.annotate(req.action.value, req.error_class)


def invalid_input(spec: StepSpec, exc: msgspec.DecodeError) -> InvalidInputError:
    """A stored input the step's input type cannot read (an older release's step may
    have written it in another shape): permanent, dead-lettered with what failed. msgspec
    quotes a bad enum or literal value, so only the field's place and a missing field's
    name (the type's own, never the data's) are shown; the detail has the rest."""
    said = str(exc)
    at = said.rpartition(" - at ")[2] if " - at " in said else ""
    missing = said.partition("missing required field ")[2].partition(" - at ")[0]
    what = f"missing field {missing}" if missing.startswith("`") else ""
    where = ", ".join(x for x in (what, f"at {at}" if at else "") if x)
    return InvalidInputError(
        f"input of step {spec.name!r} is invalid ({type(exc).__name__}"
        f"{': ' + where if where else ''}): its type {spec.input_type.__name__} does not "
        "read what the step before stored (changed by a release?)",
        detail=said,
    )


REVIEW_MAX_CHARS = 500


def review_reason(output: Any) -> str:
    """A step output's ``review`` field, when it has one: why a person should look at it
    before trusting it (see ``saga.steps.definition``). Bounded: it is stored per saga."""
    reason = getattr(output, "review", "")
    if not isinstance(reason, str):
        return ""
    reason = " ".join(reason.split())
    return reason if len(reason) <= REVIEW_MAX_CHARS else reason[: REVIEW_MAX_CHARS - 1] + "…"


def _since(created_ms: int) -> float:
    """Seconds since a saga's start (stamped by the server; clocks differ by little)."""
    return max(time.time() - created_ms / 1000, 0.0)


def _timed_out(spec: StepSpec) -> StepTimeoutError:
    return StepTimeoutError(f"step {spec.name!r} ran past its timeout of {spec.timeout_s:g}s")
