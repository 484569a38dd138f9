"""The review backlog on /metrics: how many sagas wait for a person's review and how
long the oldest has waited, per saga type, read from the review index by the snapshot
the workers and the controller refresh."""

from __future__ import annotations

from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from saga.state.keys import Keys
from saga.state.machine import StateMachine
from saga.telemetry.metrics import Metrics
from saga.telemetry.snapshot import QueueSnapshot
from tests.console.sagas import completed, flagged

pytestmark = pytest.mark.anyio


def gauges(text: str) -> dict[str, dict[str, float]]:
    found: dict[str, dict[str, float]] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name.startswith("saga_review_"):
                found.setdefault(s.name, {})[s.labels["saga_type"]] = s.value
    return found


async def test_backlog_and_age_of_the_oldest_flagged_saga(
    sm: StateMachine, redis: Any, keys: Keys
) -> None:
    """Nothing flagged: 0 and 0. Two flagged (one an hour ago), one clean: backlog 2 and
    the oldest's age about an hour; the series carry the saga type."""
    snapshot = QueueSnapshot()
    metrics = Metrics(snapshot, saga_type=keys.saga_type)
    try:
        await snapshot.refresh(redis, keys, ["router", "parser", "grouper"], [])
        assert gauges(metrics.render()) == {
            "saga_review_backlog": {keys.saga_type: 0.0},
            "saga_review_oldest_age_seconds": {keys.saga_type: 0.0},
        }
        await flagged(sm, "mr-a", "u-1")
        await flagged(sm, "mr-b", "u-2")
        await completed(sm, "mr-ok", "u-1")
        p = keys.partition_of("mr-a")
        flagged_ms = int(await redis.zscore(keys.review_index(p), "mr-a"))
        await redis.zadd(keys.review_index(p), {"mr-a": flagged_ms - 3_600_000})
        await snapshot.refresh(redis, keys, ["router", "parser", "grouper"], [])
        got = gauges(metrics.render())
    finally:
        metrics.shutdown()
    assert got["saga_review_backlog"] == {keys.saga_type: 2.0}
    assert 3600 <= got["saga_review_oldest_age_seconds"][keys.saga_type] < 3660
