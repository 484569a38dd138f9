"""What the controller adds to the worker's metrics: counters of its own work.

The queue gauges (``saga_stream_lag``, ``saga_oldest_ready_age_seconds``, ...) are the
workers' (``saga.telemetry.metrics``), refreshed here for every step of every
registered saga type. Every series carries ``saga_type`` and ``step``.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector

from saga.controller.controller import Controller

CONTROLLER_COUNTERS = {
    "saga_controller_promoted": "Due retries the controller moved back to their ready streams.",
    "saga_controller_requeued": "Entries idle past their lease the controller put back as new.",
    "saga_controller_quarantined": "Malformed, deleted or orphaned entries it moved aside.",
}


class ControllerCounters(Collector):
    """Reads the controller's per-step counts of each type at scrape time."""

    def __init__(self, controller: Controller) -> None:
        self.controller = controller

    def collect(self) -> Iterator[CounterMetricFamily]:
        works = list(self.controller.types.values())
        for name, text in CONTROLLER_COUNTERS.items():
            family = CounterMetricFamily(name, text, labels=["saga_type", "step"])
            for w in works:
                counts = {
                    "saga_controller_promoted": w.upkeep.promoted,
                    "saga_controller_requeued": w.requeuer.requeued,
                    "saga_controller_quarantined": w.requeuer.quarantined,
                }[name]
                for step in w.steps:  # every step, zero included: a rate() needs the series
                    family.add_metric([w.saga_type, step], counts.get(step, 0))
            yield family
