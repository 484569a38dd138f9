"""What the controller adds to the worker's metrics: counters of its own work.

The queue gauges (``saga_stream_lag``, ``saga_oldest_ready_age_seconds``, ...) are the
workers' (``saga.telemetry.metrics``), refreshed here for every step of the pipeline.
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
    """Reads the controller's per-step counts at scrape time."""

    def __init__(self, controller: Controller) -> None:
        self.controller = controller

    def collect(self) -> Iterator[CounterMetricFamily]:
        c = self.controller
        sources = {
            "saga_controller_promoted": c.upkeep.promoted,
            "saga_controller_requeued": c.requeuer.requeued,
            "saga_controller_quarantined": c.requeuer.quarantined,
        }
        for name, counts in sources.items():
            family = CounterMetricFamily(name, CONTROLLER_COUNTERS[name], labels=["step"])
            for step in c.steps:  # every step, zero included: a rate() needs the series
                family.add_metric([step], counts.get(step, 0))
            yield family
