"""Telemetry of one worker process: tracing (when configured), metrics, the refresh loop."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from saga.config.settings import Settings
from saga.state.keys import DEFAULT_TYPE, Keys
from saga.telemetry.metrics import Metrics
from saga.telemetry.snapshot import REFRESH_S
from saga.telemetry.tracing import configure_tracing


@dataclass
class WorkerTelemetry:
    metrics: Metrics
    steps: tuple[str, ...]
    breakers: tuple[str, ...]
    stop_tracing: Callable[[], None]
    refresh_s: float = REFRESH_S

    @classmethod
    def start(
        cls, settings: Settings, steps: Sequence[str], saga_type: str = DEFAULT_TYPE
    ) -> WorkerTelemetry:
        """Tracing over OTLP if ``OTEL_EXPORTER_OTLP_ENDPOINT`` is set; metrics always,
        labelled with the worker's saga type."""
        return cls(
            metrics=Metrics(by_user=settings.metrics_by_user, saga_type=saga_type),
            steps=tuple(steps),
            breakers=settings.breakers(),
            stop_tracing=configure_tracing(settings.otel_endpoint, "saga-worker"),
        )

    async def refresh_loop(self, client: Any, keys: Keys) -> None:
        """The gauges' queue numbers for this worker's steps, every ``refresh_s``."""
        await self.metrics.snapshot.refresh_loop(
            client, lambda: [(keys, self.steps)], self.breakers, self.refresh_s
        )

    def shutdown(self) -> None:
        """Flush spans still buffered and stop the meter provider."""
        self.stop_tracing()
        self.metrics.shutdown()
