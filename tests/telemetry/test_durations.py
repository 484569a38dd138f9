"""The step duration histogram collector: Prometheus ``le`` semantics, per step."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from saga.telemetry.durations import StepDurations


def samples(d: StepDurations) -> dict[tuple[str, str, str], float]:
    reg = CollectorRegistry()
    reg.register(d)
    out = {}
    for family in text_string_to_metric_families(generate_latest(reg).decode()):
        for s in family.samples:
            out[(s.name, s.labels.get("step", ""), s.labels.get("le", ""))] = s.value
    return out


def test_buckets_are_cumulative_and_a_value_on_a_bound_counts_in_it() -> None:
    d = StepDurations("saga_step_duration_seconds", "help", (0.1, 1.0))
    for seconds in (0.05, 0.1, 0.5, 1.0, 7.0):
        d.observe("parser", seconds)
    d.observe("router", 0.2)
    s = samples(d)
    name = "saga_step_duration_seconds"
    assert s[(f"{name}_bucket", "parser", "0.1")] == 2
    assert s[(f"{name}_bucket", "parser", "1.0")] == 4
    assert s[(f"{name}_bucket", "parser", "+Inf")] == 5
    assert s[(f"{name}_count", "parser", "")] == 5
    assert abs(s[(f"{name}_sum", "parser", "")] - 8.65) < 1e-9
    assert s[(f"{name}_bucket", "router", "0.1")] == 0
    assert s[(f"{name}_count", "router", "")] == 1


def test_no_observation_no_series() -> None:
    d = StepDurations("saga_step_duration_seconds", "help", (0.1,))
    assert samples(d) == {}
