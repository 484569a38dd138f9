"""saga bench --cluster measures a layout end to end: every saga's three transitions,
the workers' round trips and CPU, and each primary's CPU and share."""

from __future__ import annotations

import pytest

from saga.bench.cluster_bench import ClusterReport, Layout, render_cluster, run_layout

pytestmark = pytest.mark.anyio


async def test_a_three_primary_layout_is_measured_per_primary() -> None:
    """60 sagas on a three-primary cluster: 180 transitions, a figure for each primary,
    and the table renders them."""
    layout = Layout("cluster, 3 primaries, 16 partitions", 3, 16)
    r = await run_layout(layout, 60, 1, 16, lambda _: None)
    assert r.transitions == 180 and r.transitions_per_s > 0
    assert r.round_trips_per_transition > 0 and r.worker_cpu_us_per_transition > 0
    assert len(r.primary_cpu_us_per_transition) == 3
    assert all(c > 0 for c in r.primary_cpu_us_per_own_transition)
    assert r.server_cpu_us_per_transition == pytest.approx(
        sum(r.primary_cpu_us_per_transition), abs=0.5
    )
    table = render_cluster(ClusterReport(cores=2, workers=1, concurrency=16, sagas=60,
                                         results=[r]))  # fmt: skip
    assert "| cluster, 3 primaries, 16 partitions |" in table
