"""OTLP export: only with an endpoint, over http/protobuf, and a clear word without the extra."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from structlog.testing import capture_logs

from saga.telemetry import tracing

EXPORTER = "opentelemetry.exporter.otlp.proto.http.trace_exporter"


class Collector(BaseHTTPRequestHandler):
    received: list[tuple[str, str, bytes]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        Collector.received.append((self.path, self.headers.get("Content-Type", ""), body))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        return None


@pytest.fixture
def collector() -> Iterator[str]:
    """A local OTLP/HTTP endpoint that keeps what it receives."""
    Collector.received = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), Collector)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_spans_are_exported_over_otlp_http_when_an_endpoint_is_set(
    collector: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With OTEL_EXPORTER_OTLP_ENDPOINT the saga span reaches /v1/traces as protobuf."""
    pytest.importorskip(EXPORTER, reason="the otlp extra is not installed")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector)
    shutdown = tracing.configure_tracing(collector, "saga-test")
    try:
        assert tracing.enabled()
        with tracing.saga_span("rec-otlp", "user-1", "saga:{0}:ready:router") as span:
            assert tracing.traceparent_of(span).startswith("00-")
    finally:
        shutdown()
    assert not tracing.enabled()
    ((path, ctype, body),) = Collector.received
    assert path == "/v1/traces" and ctype == "application/x-protobuf"
    assert b"saga rec-otlp" in body and b"saga-test" in body
    # saga's own encoder wrote it (span_encoding): a collector parses it as OTLP.
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    (resource_spans,) = ExportTraceServiceRequest.FromString(body).resource_spans
    service = {kv.key: kv.value.string_value for kv in resource_spans.resource.attributes}
    assert service["service.name"] == "saga-test"
    ((span,),) = [list(s.spans) for s in resource_spans.scope_spans]
    attrs = {kv.key: kv.value.string_value for kv in span.attributes}
    assert span.name == "saga rec-otlp" and attrs["saga.record_id"] == "rec-otlp"
    assert len(span.trace_id) == 16 and span.end_time_unix_nano >= span.start_time_unix_nano


def test_without_the_extra_tracing_stays_off_and_says_how_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An endpoint without the exporter package: one warning, tracing off, no crash."""
    monkeypatch.setitem(sys.modules, EXPORTER, None)  # makes the import fail
    with capture_logs() as events:
        shutdown = tracing.configure_tracing("http://127.0.0.1:4318", "saga-test")
    shutdown()
    assert not tracing.enabled()
    assert [e["event"] for e in events] == ["tracing_unavailable"]
    assert "saga-runner[otlp]" in events[0]["reason"]


def test_otel_service_name_overrides_the_default_name(
    collector: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """OTEL_SERVICE_NAME names the service instead of saga's default."""
    pytest.importorskip(EXPORTER, reason="the otlp extra is not installed")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector)
    monkeypatch.setenv("OTEL_SERVICE_NAME", "records-api")
    shutdown = tracing.configure_tracing(collector, "saga-test")
    try:
        with tracing.saga_span("rec-named", "user-1", "saga:{0}:ready:router"):
            pass
    finally:
        shutdown()
    ((_, _, body),) = Collector.received
    assert b"records-api" in body and b"saga-test" not in body


def test_otel_traces_sampler_decides_which_sagas_are_traced(
    collector: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """OTEL_TRACES_SAMPLER/_ARG reach the provider: at a ratio of 0 nothing is exported,
    so operators can trace a share of sagas (saga bench --trace-ratio measures it)."""
    pytest.importorskip(EXPORTER, reason="the otlp extra is not installed")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector)
    monkeypatch.setenv("OTEL_TRACES_SAMPLER", "traceidratio")
    monkeypatch.setenv("OTEL_TRACES_SAMPLER_ARG", "0")
    shutdown = tracing.configure_tracing(collector, "saga-test")
    try:
        for i in range(20):
            with tracing.saga_span(f"rec-{i}", "user-1", "saga:{0}:ready:router") as span:
                flags = int(tracing.traceparent_of(span)[-2:], 16)
                assert flags & 1 == 0  # the W3C "sampled" bit is off
    finally:
        shutdown()
    assert Collector.received == []
