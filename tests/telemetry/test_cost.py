"""Telemetry costs next to nothing when off and stays off the CLI's read paths."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from saga.state.keys import Keys
from saga.telemetry import tracing

from .test_tracing import _claim

REPO = Path(__file__).resolve().parents[2]


def per_call_ns(fn: object, n: int = 20_000) -> float:
    """Best of five runs of ``n`` calls, in nanoseconds per call."""
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter_ns()
        for _ in range(n):
            fn()  # type: ignore[operator]
        best = min(best, (time.perf_counter_ns() - start) / n)
    return best


def test_tracing_off_takes_the_no_op_path() -> None:
    """With tracing off the attempt span and an LLM child span are the shared no-op span
    (the cost per attempt is printed with -s; saga bench measures it)."""
    assert not tracing.enabled()
    claim, keys = _claim(), Keys(prefix="bench")

    def attempt() -> None:
        with tracing.attempt_span(claim, keys, "w") as span:
            tracing.trace_id_of(claim.trace)
            with tracing.child_span("llm extract", {}) as child:
                child.set("saga.llm.cached", False)
            tracing.annotate("committed")
            span.set("saga.outcome", "committed")

    def bare() -> None:
        return None

    # What it costs is the benchmark's to measure (saga bench --features); here, that
    # tracing off takes the no-op path: the shared no-op span, and no tracer made.
    assert tracing.attempt_span(claim, keys, "w") is tracing.NO_SPAN
    assert tracing.child_span("llm extract", {}) is tracing.NO_SPAN
    cost = per_call_ns(attempt) - per_call_ns(bare)
    print(f"tracing off: {cost:.0f} ns per attempt")


@pytest.mark.parametrize(
    "command",
    [
        "import saga.cli.cmd_show, saga.cli.cmd_top, saga.api.client, saga.telemetry.tracing",
        "import saga.adapters.llm, saga.adapters.billing, saga.worker.attempt",
    ],
)
def test_read_paths_import_no_telemetry_sdk(command: str) -> None:
    """saga show/top, the client and the attempt runner load neither the tracing SDK, an
    exporter, prometheus_client nor saga's metrics (redis-py itself loads the OTel API)."""
    heavy = ("opentelemetry.sdk.trace", "opentelemetry.exporter", "prometheus_client")
    heavy += ("saga.telemetry.metrics",)
    probe = f"sorted(m for m in sys.modules if m.startswith({heavy!r}))"
    code = f"{command}\nimport sys\nprint({probe})"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    )
    assert done.stdout.strip() == "[]"
