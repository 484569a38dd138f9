"""``--tracing on``: a local OTLP/HTTP sink standing in for a collector, and the OTEL_*
environment that points the saga workers at it (or turns their SDK off)."""

from __future__ import annotations

import contextlib
import http.server
import importlib.util
import threading
from collections.abc import Iterator
from typing import Any

from saga.bench.report import Tracing


class _Sink(http.server.BaseHTTPRequestHandler):
    received = 0

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        type(self).received += 1
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        return


@contextlib.contextmanager
def otlp_sink() -> Iterator[tuple[str, type[_Sink]]]:
    """A local OTLP/HTTP endpoint that accepts and counts exports (a stand-in collector)."""
    handler = type("Sink", (_Sink,), {"received": 0})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", handler
    finally:
        server.shutdown()
        server.server_close()


def tracing_env(on: bool, endpoint: str, ratio: float = 1.0) -> dict[str, str]:
    """OTEL_* for the saga workers. Off: the SDK disabled and no endpoint."""
    if not on:
        return {"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "none"}
    return {
        "OTEL_SDK_DISABLED": "false",
        "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
        "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
        "OTEL_TRACES_EXPORTER": "otlp",
        # traceidratio (not parent-based): the start span is the bench's, always sampled.
        "OTEL_TRACES_SAMPLER": "always_on" if ratio >= 1 else "traceidratio",
        "OTEL_TRACES_SAMPLER_ARG": f"{ratio:g}",
        "OTEL_SERVICE_NAME": "saga-bench-worker",
        "OTEL_BSP_SCHEDULE_DELAY": "200",
    }


def telemetry_present() -> bool:
    return importlib.util.find_spec("saga.telemetry") is not None


def tracing_report(on: bool, exports: int) -> Tracing:
    present = telemetry_present()
    if not on:
        note = "off: OTEL_SDK_DISABLED=true for the workers"
    elif not present:
        note = (
            "requested, but saga.telemetry is not in this build: workers got OTEL_* "
            "pointing at the bench's sink and exported nothing; figures are untraced"
        )
    else:
        note = f"on: workers exported to the bench's local OTLP sink ({exports} requests)"
    return Tracing(requested=on, telemetry_module=present, exports_received=exports, note=note)
