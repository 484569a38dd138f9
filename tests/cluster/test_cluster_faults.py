"""Faults on a Redis Cluster: a worker SIGKILLed mid-step, a primary stopped and
restarted mid-run. Nothing is lost and nothing is committed twice."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from saga.state.connection import connect
from saga.state.keys import Keys
from saga.state.model import EventType, SagaState
from saga.state.reads import get_saga_and_history
from tests.cluster.local_cluster import LocalCluster
from tests.cluster.support import STEPS, all_in, assert_one_commit_per_step, env_for, start_sagas
from tests.executor.support import spawn_worker, wait_until

pytestmark = pytest.mark.anyio


async def test_a_killed_workers_step_is_reclaimed_on_a_cluster(
    cluster: LocalCluster, client: Any, keys: Keys, tmp_path: Path
) -> None:
    """Recovery (XAUTOCLAIM and the claim script, per partition on its node) takes over
    the step of a SIGKILLed worker once its lease has expired."""
    env = {**env_for(cluster, keys, tmp_path), "SAGA_ROUTER_LEASE": "1"}
    rids = [f"hangonce-{i}" for i in range(4)]
    await start_sagas(client, keys, rids)
    first = spawn_worker(env, tmp_path / "first.log", STEPS)
    try:

        async def all_running() -> bool:
            assert first.alive(), first.tail()
            return await all_in(client, keys, rids, SagaState.RUNNING)

        await wait_until(all_running, within=30, what="hung attempts", on_timeout=first.tail)
    finally:
        first.kill()
    second = spawn_worker(env, tmp_path / "second.log", STEPS)
    try:

        async def all_completed() -> bool:
            return await all_in(client, keys, rids, SagaState.COMPLETED)

        await wait_until(all_completed, within=60, what="reclaimed", on_timeout=second.tail)
    finally:
        second.kill()
    for rid in rids:
        _, events = await get_saga_and_history(client, keys, rid)
        assert EventType.RECLAIMED in [e.event for e in events]


async def test_a_primary_stopped_and_restarted_mid_run_loses_nothing(
    cluster: LocalCluster, client: Any, keys: Keys, tmp_path: Path
) -> None:
    """While one primary is down, its partitions' calls fail to connect and the other
    nodes answer CLUSTERDOWN; the worker waits both out (no crash, no restart) and
    every saga completes with one commit per step once the node is back."""
    # A claim whose reply the outage swallowed stays pending until its lease expires:
    # short leases keep that wait (and the test) short.
    short = {f"SAGA_{s.upper()}_LEASE": "3" for s in STEPS}
    env = {**env_for(cluster, keys, tmp_path), **short}
    rids = [f"slow-0.05-{i:03d}" for i in range(120)]
    await start_sagas(client, keys, rids)
    worker = spawn_worker(env, tmp_path / "worker.log", STEPS)
    try:

        async def some_committed() -> bool:
            return bool(worker.logged("step_committed"))

        await wait_until(some_committed, within=30, what="first commits", on_timeout=worker.tail)
        await anyio.to_thread.run_sync(cluster.stop_node, 1)

        async def cluster_down() -> bool:
            return b"cluster_state:fail" in await anyio.to_thread.run_sync(cluster.state, 0)

        await wait_until(cluster_down, within=15, what="CLUSTERDOWN on the other nodes")

        async def worker_met_clusterdown() -> bool:  # refused by the nodes still up
            return await anyio.to_thread.run_sync(cluster.clusterdown_replies) > 0

        await wait_until(worker_met_clusterdown, within=15, what="the worker to meet CLUSTERDOWN",
                         on_timeout=worker.tail)  # fmt: skip
        await anyio.to_thread.run_sync(cluster.restart_node, 1)

        async def all_completed() -> bool:
            assert worker.alive(), worker.tail()
            fresh = connect(cluster.url, cluster=True)
            try:
                return await all_in(fresh, keys, rids, SagaState.COMPLETED)
            finally:
                await fresh.aclose()

        await wait_until(all_completed, within=90, what="every saga", every=0.5,
                         on_timeout=worker.tail)  # fmt: skip
        assert worker.alive()
        # Commits refused with CLUSTERDOWN were re-sent, not handed to their attempts.
        assert worker.logged("attempt_abandoned") == []
    finally:
        worker.kill()
    check = connect(cluster.url, cluster=True)
    try:
        await assert_one_commit_per_step(check, keys, rids)
    finally:
        await check.aclose()
