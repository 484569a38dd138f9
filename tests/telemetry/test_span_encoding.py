"""The hand-written OTLP request parses to exactly what the SDK's encoder builds, for
the spans saga makes and for the ones it leaves to the SDK (events, links, odd values)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import pytest
from structlog.testing import capture_logs

pytest.importorskip(
    "opentelemetry.exporter.otlp.proto.http.trace_exporter",
    reason="the otlp extra is not installed",
)

from opentelemetry.exporter.otlp.proto.common._internal import trace_encoder as sdk
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)
from opentelemetry.trace import Link, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import (
    TraceContextTextMapPropagator,
)

from saga.telemetry import span_encoding

PARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


@pytest.fixture(autouse=True)
def unbound() -> Iterator[None]:
    """The SDK's private parts are bound on first use: bind them within each test (from
    what it patched), and never let a test's patch outlive it."""
    span_encoding._Sdk.kinds = {}
    yield
    span_encoding._Sdk.kinds = {}


@pytest.fixture
def made() -> Iterator[tuple[Any, InMemorySpanExporter]]:
    memory = InMemorySpanExporter()
    resource = Resource(
        {"service.name": "saga-worker", "host.cores": 2, "process.args": ("saga", "worker")},
        schema_url="https://opentelemetry.io/schemas/1.21.0",
    )
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(SimpleSpanProcessor(memory))
    yield provider.get_tracer("saga", "1.0", schema_url="https://example.test/s"), memory
    provider.shutdown()


def ours(spans: list[ReadableSpan]) -> ExportTraceServiceRequest:
    return ExportTraceServiceRequest.FromString(span_encoding.encode_spans(spans).data)


def test_an_attempt_span_is_encoded_as_the_sdk_does(
    made: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    tracer, memory = made
    remote = TraceContextTextMapPropagator().extract(
        {"traceparent": PARENT, "tracestate": "saga=1,vendor=x"}
    )
    attrs = {
        "messaging.system": "redis",
        "messaging.destination.name": "saga:{3}:ready:parser",
        "messaging.message.id": "1733000000000-0",
        "saga.record_id": "rec-ünïcode-" + "x" * 200,  # a length past one byte's varint
        "saga.attempt": 2,
        "saga.epoch": 0,
        "saga.offset": -5,  # a negative int64: ten bytes of varint
        "saga.cost_usd": 0.00123,
        "saga.api.retry": False,
        "saga.final": True,
        "saga.empty": "",
        "saga.steps": ("router", "parser"),
        "saga.flags": (True, 3, 1.5),
        "saga.none_yet": (),
    }
    with tracer.start_as_current_span(
        "process parser", context=remote, kind=SpanKind.CONSUMER, attributes=attrs
    ) as span:
        span.set_attribute("saga.outcome", "committed")
        with tracer.start_as_current_span("llm call", kind=SpanKind.CLIENT) as child:
            child.set_status(Status(StatusCode.ERROR, "model returned garbage"))
    with tracer.start_as_current_span("internal"):
        pass
    spans = list(memory.get_finished_spans())
    assert len(spans) == 3
    expected = sdk.encode_spans(spans)
    fallbacks: list[Any] = []
    monkeypatch.setattr(sdk, "_encode_span", fallbacks.append)
    assert ours(spans) == expected
    assert fallbacks == []  # every one of these took the fast path


def test_spans_the_fast_path_leaves_to_the_sdk_still_match(made: Any) -> None:
    tracer, memory = made
    with tracer.start_as_current_span("with an event") as span:
        span.add_event("exception", {"exception.type": "ValueError"})
    other = memory.get_finished_spans()[0].get_span_context()
    with tracer.start_as_current_span("with a link", links=[Link(other, {"why": "retry"})]):
        pass
    with tracer.start_as_current_span("int past int64", attributes={"big": 1 << 64}):
        pass
    with tracer.start_as_current_span("ok", kind=SpanKind.PRODUCER, attributes={"n": 1}):
        pass
    # Equal as Python values, apart on the wire: the attribute cache keeps them apart.
    for value in (True, 1, 1.0, 0.0, -0.0, False, 0, (0.0,), (-0.0,)):
        with tracer.start_as_current_span("alike", attributes={"v": value}):
            pass
    spans = list(memory.get_finished_spans())
    assert ours(spans) == sdk.encode_spans(spans)
    assert ours([]) == sdk.encode_spans([])


def test_two_providers_stay_two_resources(made: Any) -> None:
    tracer, memory = made
    other_memory = InMemorySpanExporter()
    other = TracerProvider(resource=Resource({"service.name": "saga-cli"}))
    other.add_span_processor(SimpleSpanProcessor(other_memory))
    with tracer.start_as_current_span("a"):
        pass
    with other.get_tracer("saga").start_as_current_span("b"):
        pass
    other.shutdown()
    spans = [*memory.get_finished_spans(), *other_memory.get_finished_spans()]
    request = ours(spans)
    assert request == sdk.encode_spans(spans)
    assert len(request.resource_spans) == 2


@pytest.fixture
def exporter() -> Iterator[Any]:
    """The OTLP/HTTP exporter module, its encoder restored after the test."""
    from opentelemetry.exporter.otlp.proto.http import trace_exporter

    before = trace_exporter.encode_spans
    yield trace_exporter
    trace_exporter.encode_spans = before


def _fell_back(logs: list[dict[str, Any]]) -> None:
    """Exactly one warning said the SDK's own encoder is used."""
    warned = [e for e in logs if e["event"] == "span_encoder_unavailable"]
    assert len(warned) == 1 and warned[0]["log_level"] == "warning", logs


def test_install_makes_the_exporter_use_it(exporter: Any) -> None:
    """Installed, the exporter's encode_spans is ours (behind a guard)."""
    with capture_logs() as logs:
        assert span_encoding.install()
    assert getattr(exporter.encode_spans, "saga_fast", False)
    assert logs == []


def test_install_keeps_the_sdks_encoder_when_the_exporter_has_no_such_function(
    exporter: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The exporter no longer calls a module-level encode_spans: nothing is replaced."""
    monkeypatch.delattr(exporter, "encode_spans")
    with capture_logs() as logs:
        assert span_encoding.install() is False
    assert not hasattr(exporter, "encode_spans")
    _fell_back(logs)


def test_a_private_module_that_moved_keeps_the_sdks_encoder(
    exporter: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The exporter's ``_internal`` package renamed (an import error): SDK's encoder kept."""
    before = exporter.encode_spans
    monkeypatch.setitem(sys.modules, "opentelemetry.exporter.otlp.proto.common._internal", None)
    with capture_logs() as logs:
        assert span_encoding.install() is False
    assert exporter.encode_spans is before
    _fell_back(logs)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("_encode_span", None),  # removed
        ("_encode_span", lambda span, extra: None),  # its signature changed
        ("_SPAN_KIND_MAP", {}),  # its content changed
    ],
)
def test_a_changed_private_function_keeps_the_sdks_encoder(
    exporter: Any, monkeypatch: pytest.MonkeyPatch, name: str, value: Any
) -> None:
    """A private name gone, a signature changed or a table changed: the self-test at
    install sees it and the SDK's encoder stays, with one warning."""
    before = exporter.encode_spans
    if value is None:
        monkeypatch.delattr(sdk, name)
    else:
        monkeypatch.setattr(sdk, name, value)
    with capture_logs() as logs:
        assert span_encoding.install() is False
    assert exporter.encode_spans is before
    _fell_back(logs)


def test_output_that_differs_from_the_sdks_keeps_the_sdks_encoder(
    exporter: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """If the hand-written request ever parses differently from the SDK's, not installed."""
    before = exporter.encode_spans
    monkeypatch.setattr(span_encoding, "_status", lambda span: b"")
    with capture_logs() as logs:
        assert span_encoding.install() is False
    assert exporter.encode_spans is before
    _fell_back(logs)


def test_an_error_at_export_time_falls_back_for_good(
    exporter: Any, monkeypatch: pytest.MonkeyPatch, made: Any
) -> None:
    """Installed, then failing on a batch: that batch and every later one take the SDK's
    encoder; one warning."""
    tracer, memory = made
    with tracer.start_as_current_span("s"):
        pass
    spans = memory.get_finished_spans()
    assert span_encoding.install()
    monkeypatch.setattr(span_encoding, "_span", lambda span: 1 / 0)
    with capture_logs() as logs:
        request = exporter.encode_spans(spans)
        again = exporter.encode_spans(spans)
    assert request == sdk.encode_spans(spans) == again
    assert not getattr(exporter.encode_spans, "saga_fast", False)
    _fell_back(logs)
