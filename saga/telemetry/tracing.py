"""One OpenTelemetry trace per saga, across processes.

Shape::

    saga <record_id>        PRODUCER   SagaClient.start / `saga start` (or the caller's span)
    ├── process router      CONSUMER   one per attempt, in whichever worker claimed it
    │   └── billing key     CLIENT     the user's key from the cache or billing service
    ├── process parser      CONSUMER
    │   └── llm extract     CLIENT     model, tokens, cost; never content
    └── process grouper     CONSUMER

``start`` stores the W3C ``traceparent`` of the ``saga`` span in the saga hash;
every claim returns it, and the attempt span takes it as its parent.

Off by default: until ``configure_tracing`` (an OTLP endpoint is set) or
``use_provider`` (tests, an embedding app), the module-level tracer is None and
every helper returns one shared no-op object without importing OpenTelemetry.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping
from typing import Any

import structlog

from saga.state.keys import GROUP, Keys
from saga.state.model import Claim

log = structlog.get_logger("saga.telemetry")

AttrValue = str | bool | int | float


class NoSpan:
    """The span when tracing is off: every method does nothing."""

    __slots__ = ()
    trace_id = ""
    span_id = ""

    def __enter__(self) -> NoSpan:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def set(self, key: str, value: AttrValue) -> None:
        return None

    def fail(self, error_class: str) -> None:
        return None


NO_SPAN = NoSpan()


class _Active:
    tracer: Any = None
    """The tracer spans are made with; None while tracing is off (the fast path)."""


def enabled() -> bool:
    return _Active.tracer is not None


def use_provider(provider: Any) -> None:
    """Make spans with ``provider`` (a TracerProvider) from now on."""
    _Active.tracer = provider.get_tracer("saga")


def disable_tracing() -> None:
    _Active.tracer = None


def configure_tracing(
    endpoint: str, service_name: str, *, announce: bool = True
) -> Callable[[], None]:
    """Export spans over OTLP (http/protobuf) when ``endpoint`` is set; returns shutdown.

    The exporter reads ``OTEL_EXPORTER_OTLP_*`` itself (endpoint, headers,
    timeout). Without an endpoint nothing is imported and nothing is exported.
    ``announce`` logs ``tracing_enabled`` (workers do; ``saga start`` stays quiet).
    """
    if not endpoint:
        return _nothing
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    except ImportError:
        log.warning("tracing_unavailable", reason="pip install 'saga-runner[otlp]'")
        return _nothing
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    resource = Resource.create()  # OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win
    if str(resource.attributes.get("service.name", "")).startswith("unknown_service"):
        resource = resource.merge(Resource({"service.name": service_name}))
    provider = TracerProvider(resource=resource)
    from saga.telemetry import span_encoding

    span_encoding.install()  # the same request, a fraction of the SDK encoder's CPU
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    use_provider(provider)
    if announce:
        log.info("tracing_enabled", exporter="otlp")

    def shutdown() -> None:
        disable_tracing()
        provider.shutdown()

    return shutdown


def _nothing() -> None:
    return None


# -- spans ------------------------------------------------------------------------


class LiveSpan:
    """A started span, current in this task until the ``with`` block ends."""

    __slots__ = ("_span", "_token", "span_id", "trace_id")

    def __init__(self, span: Any, parent: Any) -> None:
        from opentelemetry import context, trace

        self._span = span
        self._token = context.attach(trace.set_span_in_context(span, parent))
        sc = span.get_span_context()
        self.trace_id = format(sc.trace_id, "032x")
        self.span_id = format(sc.span_id, "016x")

    def __enter__(self) -> LiveSpan:
        return self

    def __exit__(self, t: type[BaseException] | None, e: BaseException | None, tb: Any) -> None:
        from opentelemetry import context

        if e is not None and isinstance(e, Exception):
            self.fail(type(e).__name__)  # the type only: messages can hold content
        context.detach(self._token)
        self._span.end()

    def set(self, key: str, value: AttrValue) -> None:
        self._span.set_attribute(key, value)

    def fail(self, error_class: str) -> None:
        from opentelemetry.trace import Status, StatusCode

        self._span.set_attribute("error.type", error_class)
        self._span.set_status(Status(StatusCode.ERROR))

    def traceparent(self) -> str:
        from opentelemetry import trace
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        carrier: dict[str, str] = {}
        TraceContextTextMapPropagator().inject(carrier, trace.set_span_in_context(self._span))
        return carrier.get("traceparent", "")


def _start(tracer: Any, name: str, kind: str, attrs: Mapping[str, AttrValue], parent: Any) -> Any:
    from opentelemetry.trace import SpanKind

    return LiveSpan(
        tracer.start_span(name, context=parent, kind=SpanKind[kind], attributes=dict(attrs)),
        parent,
    )


def attempt_span(claim: Claim, keys: Keys, worker: str) -> NoSpan | LiveSpan:
    """``process <step>`` (CONSUMER), child of the context stored at start."""
    tracer = _Active.tracer
    if tracer is None:
        return NO_SPAN
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    parent = TraceContextTextMapPropagator().extract({"traceparent": claim.trace})
    attrs: dict[str, AttrValue] = {
        "messaging.system": "redis",
        "messaging.operation.type": "process",
        "messaging.destination.name": keys.ready(keys.partition_of(claim.record_id), claim.step),
        "messaging.consumer.group.name": GROUP,
        "messaging.message.id": claim.entry_id,
        "saga.record_id": claim.record_id,
        "saga.user_id": claim.user_id,
        "saga.step": claim.step,
        "saga.attempt": claim.attempt,
        "saga.epoch": claim.epoch,
        "saga.worker": worker,
    }
    return _start(tracer, f"process {claim.step}", "CONSUMER", attrs, parent)  # type: ignore[no-any-return]


def child_span(name: str, attrs: Mapping[str, AttrValue]) -> NoSpan | LiveSpan:
    """A CLIENT span under the current one (an LLM call, a billing fetch)."""
    tracer = _Active.tracer
    if tracer is None:
        return NO_SPAN
    return _start(tracer, name, "CLIENT", attrs, None)  # type: ignore[no-any-return]


def saga_span(record_id: str, user_id: str, destination: str) -> NoSpan | LiveSpan:
    """``saga <record_id>`` (PRODUCER): the root of the saga's trace, or a child of
    the caller's current span when an instrumented API starts the saga."""
    tracer = _Active.tracer
    if tracer is None:
        tracer = _caller_tracer()
        if tracer is None:
            return NO_SPAN
    attrs: dict[str, AttrValue] = {
        "messaging.system": "redis",
        "messaging.operation.type": "send",
        "messaging.destination.name": destination,
        "saga.record_id": record_id,
        "saga.user_id": user_id,
    }
    return _start(tracer, f"saga {record_id}", "PRODUCER", attrs, None)  # type: ignore[no-any-return]


def _caller_tracer() -> Any:
    """The application's tracer when it has a current span; None otherwise.

    Only looked at when the application already imported OpenTelemetry: a
    process that never did cannot be inside a span.
    """
    if "opentelemetry.trace" not in sys.modules:
        return None
    from opentelemetry import trace

    if not trace.get_current_span().get_span_context().is_valid:
        return None
    return trace.get_tracer("saga")


def traceparent_of(span: NoSpan | LiveSpan) -> str:
    """The W3C traceparent to store with the saga. With tracing off a fresh one is
    made up, so every log line of the saga, in every process, still carries one
    trace_id; workers that do trace use it as their parent."""
    if isinstance(span, LiveSpan):
        return span.traceparent()
    return f"00-{os.urandom(16).hex()}-{os.urandom(8).hex()}-01"


def trace_id_of(traceparent: str) -> str:
    """The trace id inside a stored traceparent ("" when there is none)."""
    parts = traceparent.split("-")
    return parts[1] if len(parts) == 4 and len(parts[1]) == 32 else ""


def annotate(outcome: str, error_class: str = "") -> None:
    """Set the attempt's outcome (and error type) on the current span, if any."""
    if _Active.tracer is None:
        return
    from opentelemetry import trace
    from opentelemetry.trace import Status, StatusCode

    span = trace.get_current_span()
    span.set_attribute("saga.outcome", outcome)
    if error_class:
        span.set_attribute("error.type", error_class)
        span.set_status(Status(StatusCode.ERROR))
