"""Failover to a replica under load: three primaries with a replica each, real worker
processes, a steady stream of sagas; a primary is SIGKILLed, its replica promoted, and
the old primary comes back as a replica. Nothing is committed twice; with
SAGA_COMMIT_DURABILITY=replica no acknowledged start is lost either.

Figures are printed (run with ``-s``); docs/operations.md quotes them."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from saga.state.connection import connect
from saga.state.keys import Keys
from saga.state.limits import StateLimits
from saga.state.machine import StateMachine
from saga.state.scripts import ensure_loaded
from saga.state.streams import ensure_groups
from tests.cluster.churn import Churn, figures, settled
from tests.cluster.local_cluster import LocalCluster
from tests.cluster.support import STEPS, env_for
from tests.executor.support import spawn_worker, wait_until

pytestmark = pytest.mark.anyio

SHORT = {f"SAGA_{s.upper()}_LEASE": "3" for s in STEPS}
"""Short leases: an attempt whose claim or commit the failover lost re-runs in ~3 s."""


def busiest_primary(cluster: LocalCluster, client: Any, keys: Keys) -> int:
    """The live primary that owns the most of the keyspace's partitions."""
    owners = [client.get_node_from_key(keys.ready(p, "router")).port for p in range(8)]
    port = max(set(owners), key=owners.count)
    return cluster.node_of_port(port)


async def run_failover(
    cluster: LocalCluster, tmp_path: Path, *, durability: str, seconds: float, kills: int
) -> None:
    keys = Keys(prefix=f"f{durability[:3]}{int(time.time()) % 100000}", partitions=8)
    env = {**env_for(cluster, keys, tmp_path), **SHORT, "SAGA_COMMIT_DURABILITY": durability}
    client = connect(cluster.url, cluster=True)
    await client.initialize()
    limits = StateLimits(commit_replicas=1 if durability == "replica" else 0)
    await ensure_loaded(client)
    await ensure_groups(client, keys, STEPS)
    churn = Churn(StateMachine(client, keys, limits))
    workers = [spawn_worker(env, tmp_path / f"w{i}.log", STEPS) for i in range(2)]
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(churn.run)
            for _ in range(kills):
                await anyio.sleep(seconds / (kills + 1))
                await failover_once(cluster, client, keys, churn)
            await anyio.sleep(seconds / (kills + 1))
            churn.stop.set()

        async def done() -> bool:
            assert all(w.alive() for w in workers), [w.tail() for w in workers]
            return await settled(client, keys, churn.acked)

        def tails() -> str:
            return "\n".join(w.tail() for w in workers)

        took = await wait_until(done, within=60, what="every saga", every=0.5, on_timeout=tails)
        f = await figures(client, keys, churn.acked, workers)
        print(f"\nfailover durability={durability}: {f.line()} drained_after={took:.1f}s "
              f"start_errors={churn.start_errors}")  # fmt: skip
        assert f.double_commits == []
        assert f.completed + len(f.lost) == f.started
        if durability == "replica":
            assert f.lost == [], f"acknowledged starts lost: {f.lost[:5]}"
        assert all(w.logged("attempt_abandoned") == [] for w in workers)
    finally:
        for w in workers:
            w.kill()
        await client.aclose()


async def failover_once(cluster: LocalCluster, client: Any, keys: Keys, churn: Churn) -> None:
    """SIGKILL the busiest primary; time its replica's promotion, the first saga started
    after it completing, and the old primary rejoining as a replica."""
    victim = busiest_primary(cluster, client, keys)
    heir = cluster.replica_of(victim)
    killed = time.monotonic()
    await anyio.to_thread.run_sync(cluster.kill_node, victim)

    async def promoted() -> bool:
        return await anyio.to_thread.run_sync(cluster.is_primary, heir)

    await wait_until(promoted, within=20, what="the replica promoted", every=0.05)
    t_promoted = time.monotonic() - killed
    first = len(churn.acked)
    # Restarted at once, as Kubernetes restarts a killed pod. With durability=replica the
    # promoted primary's commits wait for it: it is that primary's only replica now.
    await anyio.to_thread.run_sync(cluster.start_node, victim)

    async def flowing() -> bool:  # a saga started after the promotion, on any partition
        return len(churn.acked) > first + 8 and await settled(
            client, keys, churn.acked[first : first + 8]
        )

    await wait_until(flowing, within=30, what="sagas completing again", every=0.1)
    t_flowing = time.monotonic() - killed

    async def rejoined() -> bool:
        return await anyio.to_thread.run_sync(cluster.replica_synced, victim)

    await wait_until(rejoined, within=30, what="the old primary back as a replica", every=0.1)
    print(f"\nkill -9 node {victim}: replica {heir} promoted after {t_promoted:.2f}s, "
          f"sagas completing after {t_flowing:.2f}s, old primary a replica after "
          f"{time.monotonic() - killed:.2f}s")  # fmt: skip


@pytest.mark.parametrize("durability", ["local", "replica"])
async def test_a_primary_killed_under_load_fails_over_without_double_commits(
    replicated: LocalCluster, tmp_path: Path, durability: str
) -> None:
    """kill -9 of a primary mid-run: its replica takes over, sagas keep completing,
    none is committed twice, and with durability=replica no acknowledged start is lost."""
    await run_failover(replicated, tmp_path, durability=durability, seconds=8, kills=1)


@pytest.mark.slow
async def test_failover_soak(replicated: LocalCluster, tmp_path: Path) -> None:
    """Three failovers in a row over a minute of sagas, durability=replica."""
    await run_failover(replicated, tmp_path, durability="replica", seconds=60, kills=3)
