"""Worker metrics through the OpenTelemetry SDK, rendered as Prometheus text.

One ``Metrics`` per worker process: a MeterProvider whose Prometheus reader
writes to a private ``prometheus_client`` registry (never the global one), the
counters and histogram the executor's ``Observer`` hooks feed, and observable
gauges whose callbacks only read ``QueueSnapshot``, a cache the worker
refreshes from Redis every few seconds (``QueueSnapshot.refresh_loop``), so a
scrape never waits on Redis and never blocks the event loop.

Names (Prometheus), labels and meaning are listed in ``docs/operations.md``. Every
series of a step carries ``saga_type`` beside ``step`` (types may share step names): the
worker's own type on its counters and histograms, each row's type on the gauges (a
controller serves every type). The document pipeline's is ``documents``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from opentelemetry.exporter.prometheus import PrometheusMetricReader
from opentelemetry.metrics import CallbackOptions, Observation
from opentelemetry.sdk.metrics import MeterProvider
from prometheus_client import CollectorRegistry, ProcessCollector, generate_latest

from saga.state.keys import DEFAULT_TYPE
from saga.telemetry.budget_metrics import NAMES as BUDGET_NAMES
from saga.telemetry.budget_metrics import BudgetInstruments
from saga.telemetry.durations import StepDurations
from saga.telemetry.snapshot import QueueSnapshot
from saga.worker.observer import Observer

DURATION_BUCKETS_S = (
    0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0,
)  # fmt: skip
"""Step duration buckets: 10 ms (a no-op step) to 10 min (the longest step timeout)."""

SAGA_BUCKETS_S = (
    0.1, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1200.0, 1800.0, 3600.0, 7200.0,
)  # fmt: skip
"""End-to-end saga buckets: 100 ms (no-op steps) to 2 h (retries with backoff, slow LLMs)."""

CIRCUIT_VALUES = {"closed": 0, "half_open": 1, "open": 2}

_COUNTERS = {
    "claimed": "Attempts claimed by this worker (the lease taken).",
    "committed": "Attempts whose output was committed.",
    "failed": "Attempts that raised (retried, parked or dead-lettered).",
    "retried": "Failed attempts scheduled for a retry with backoff.",
    "dead_lettered": "Failed attempts that dead-lettered the saga.",
    "parked": "Attempts parked with their attempt refunded (circuit open or budget spent; "
    "saga_step_errors_total's error_class says which).",
    "fenced": "Attempts that lost their lease to another worker (their result was dropped).",
    "quarantined": "Malformed stream entries moved aside.",
    "left_for_newer_release": "Ready entries of a newer release left pending for a newer worker.",
    "flagged_for_review": "Committed outputs that flagged their saga for a person's review.",
}

_GAUGES = {
    "saga_stream_length": ("length", "Entries in the step's ready streams."),
    "saga_stream_lag": ("lag", "Entries not yet delivered to the step's consumer group."),
    "saga_stream_pending": ("pending", "Entries delivered and not acknowledged (running)."),
    "saga_dead_letters": ("dead", "Dead letters in the step's dead-letter streams."),
    "saga_retries_waiting": ("delayed", "Retries waiting for their due time."),
    "saga_consumers_active": ("workers", "Live workers of the saga type serving the step."),
}


class Metrics:
    """The instruments of one process and the text of its ``/metrics``."""

    def __init__(
        self,
        snapshot: QueueSnapshot | None = None,
        *,
        by_user: bool = False,
        saga_type: str = DEFAULT_TYPE,
    ) -> None:
        """``saga_type``: the type whose steps this process runs (its counters' label)."""
        self.snapshot = snapshot or QueueSnapshot()
        self.snapshot.budget.per_user = by_user
        self.by_user = by_user
        self.saga_type = saga_type
        self.registry = CollectorRegistry(auto_describe=True)
        self.provider = MeterProvider(
            metric_readers=[_reader(self.registry)],
            shutdown_on_exit=False,
        )
        meter = self.provider.get_meter("saga")
        # The step counters are plain ints read at scrape time (observable counters):
        # an OTel counter.add costs ~3 µs, paid on every step transition.
        self.counts: dict[str, dict[str, int]] = {name: {} for name in _COUNTERS}
        for name, text in _COUNTERS.items():
            meter.create_observable_counter(
                f"saga_steps_{name}", [self._count_callback(name)], unit="1", description=text
            )
        self.duration = StepDurations(
            "saga_step_duration_seconds",
            "Duration of attempts, claim to finish.",
            DURATION_BUCKETS_S,
            saga_type=saga_type,
        )
        self.registry.register(self.duration)
        self.saga_duration = StepDurations(
            "saga_end_to_end_seconds",
            "Sagas from start to their end (completed, or failed: dead-lettered), seen by the "
            "worker of the last step.",
            SAGA_BUCKETS_S,
            label="outcome",
            saga_type=saga_type,
        )
        self.registry.register(self.saga_duration)
        # Failed attempts by error class (class names: a bounded set), read at scrape time.
        self.errors: dict[tuple[str, str], int] = {}
        meter.create_observable_counter(
            "saga_step_errors",
            [self._errors],
            unit="1",
            description="Failed attempts by step and error class.",
        )
        # CPU, memory, open files and start time of this process (Linux /proc).
        ProcessCollector(registry=self.registry)
        self.cost = meter.create_counter(
            "saga_llm_cost_usd", unit="1", description="LLM spend in USD, by step (and user)."
        )
        self.tokens = meter.create_counter(
            "saga_llm_tokens", unit="1", description="LLM tokens (prompt + completion)."
        )
        for name, (field, text) in _GAUGES.items():
            meter.create_observable_gauge(name, [self._queue_callback(field)], description=text)
        meter.create_observable_gauge(
            "saga_oldest_ready_age_seconds",
            [self._oldest],
            description="Age of the step's oldest entry waiting for a worker (0: none waiting).",
        )
        meter.create_observable_gauge(
            "saga_review_backlog",
            [self._review(0)],
            description="Sagas waiting for a person's review (saga list --review).",
        )
        meter.create_observable_gauge(
            "saga_review_oldest_age_seconds",
            [self._review(1)],
            description="How long the saga waiting longest for review has waited (0: none).",
        )
        meter.create_observable_gauge(
            "saga_circuit_state",
            [self._circuits],
            description="Circuit breaker state per dependency: 0 closed, 1 half-open, 2 open.",
        )
        self.budget = BudgetInstruments(meter, self.snapshot.budget, saga_type)
        self.observer = MetricsObserver(self)

    def render(self) -> str:
        """Prometheus text exposition of every instrument (for ``/metrics``)."""
        return generate_latest(self.registry).decode()

    def shutdown(self) -> None:
        self.provider.shutdown()

    def _count_callback(self, name: str) -> Any:
        by_step, saga_type = self.counts[name], self.saga_type

        def observe(_options: CallbackOptions) -> Iterable[Observation]:
            for step, value in list(by_step.items()):
                yield Observation(value, {"saga_type": saga_type, "step": step})

        return observe

    def _queue_callback(self, field: str) -> Any:
        def observe(_options: CallbackOptions) -> Iterable[Observation]:
            for saga_type, stats in self.snapshot.rows():
                value = getattr(stats, field)
                if value is not None:
                    yield Observation(value, {"saga_type": saga_type, "step": stats.step})

        return observe

    def _oldest(self, _options: CallbackOptions) -> Iterable[Observation]:
        ages = self.snapshot.oldest_age_s
        for saga_type, stats in self.snapshot.rows():
            age = ages.get((saga_type, stats.step), 0.0)
            yield Observation(age, {"saga_type": saga_type, "step": stats.step})

    def _review(self, field: int) -> Any:
        def observe(_options: CallbackOptions) -> Iterable[Observation]:
            for saga_type, numbers in list(self.snapshot.review.items()):
                yield Observation(numbers[field], {"saga_type": saga_type})

        return observe

    def _errors(self, _options: CallbackOptions) -> Iterable[Observation]:
        for (step, error_class), n in list(self.errors.items()):
            labels = {"saga_type": self.saga_type, "step": step, "error_class": error_class}
            yield Observation(n, labels)

    def _circuits(self, _options: CallbackOptions) -> Iterable[Observation]:
        for name, status in self.snapshot.breakers.items():
            state = getattr(status.state, "value", status.state)
            yield Observation(CIRCUIT_VALUES.get(state, 2), {"dependency": name})


class MetricsObserver(Observer):
    """The executor's hooks, counted."""

    def __init__(self, metrics: Metrics) -> None:
        self.m = metrics
        self.c = metrics.counts

    def _add(self, name: str, step: str, n: int = 1) -> None:
        by_step = self.c[name]
        by_step[step] = by_step.get(step, 0) + n

    def claimed(self, step: str, n: int) -> None:
        if n:
            self._add("claimed", step, n)

    def committed(self, step: str, duration_s: float) -> None:
        self._add("committed", step)
        self.m.duration.observe(step, duration_s)

    def failed(self, step: str, action: str, duration_s: float) -> None:
        self._add("failed", step)
        if action == "retry":
            self._add("retried", step)
        elif action == "dead":
            self._add("dead_lettered", step)
        elif action == "park":
            self._add("parked", step)
        self.m.duration.observe(step, duration_s)

    def fenced(self, step: str) -> None:
        self._add("fenced", step)

    def flagged(self, step: str) -> None:
        self._add("flagged_for_review", step)

    def error(self, step: str, error_class: str) -> None:
        key = (step, error_class)
        self.m.errors[key] = self.m.errors.get(key, 0) + 1

    def saga_ended(self, outcome: str, seconds: float) -> None:
        self.m.saga_duration.observe(outcome, seconds)

    def quarantined(self, step: str) -> None:
        self._add("quarantined", step)

    def left_for_newer(self, step: str) -> None:
        self._add("left_for_newer_release", step)

    def cost(self, step: str, user_id: str, usd: float, tokens: int) -> None:
        attrs = {"saga_type": self.m.saga_type, "step": step}
        if self.m.by_user:
            attrs["user_id"] = user_id
        if usd:
            self.m.cost.add(usd, attrs)
        if tokens:
            self.m.tokens.add(tokens, attrs)


def _reader(registry: CollectorRegistry) -> PrometheusMetricReader:
    """A reader that registers with ``registry`` (older exporters only know the global one)."""
    try:
        return PrometheusMetricReader(
            disable_target_info=True, scope_info_enabled=False, registry=registry
        )
    except TypeError:  # opentelemetry-exporter-prometheus before the registry argument
        from prometheus_client import REGISTRY

        reader = PrometheusMetricReader(disable_target_info=True)
        collector = reader._collector
        REGISTRY.unregister(collector)
        registry.register(collector)
        return reader


def metric_names() -> list[str]:
    """Every metric family name this module exposes (for docs and tests)."""
    counters = [f"saga_steps_{n}_total" for n in _COUNTERS]
    return [
        *counters,
        "saga_step_errors_total",
        "saga_step_duration_seconds",
        "saga_end_to_end_seconds",
        "saga_llm_cost_usd_total",
        "saga_llm_tokens_total",
        *_GAUGES,
        "saga_oldest_ready_age_seconds",
        "saga_review_backlog",
        "saga_review_oldest_age_seconds",
        "saga_circuit_state",
        *BUDGET_NAMES,
    ]
