"""Resharding under load: the slot of a busy partition's hash tag moves to another
primary (SETSLOT IMPORTING/MIGRATING + MIGRATE in small batches, as
``redis-cli --cluster reshard`` does) while real workers run and sagas keep arriving.
The client follows ASK and MOVED and re-sends on TRYAGAIN; no transition is lost or
doubled, and the scripts keep working because each call's keys share one slot."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from redis.crc import key_slot

from saga.state.connection import connect
from saga.state.keys import Keys
from saga.state.machine import StateMachine
from saga.state.scripts import ensure_loaded
from saga.state.streams import ensure_groups
from tests.cluster.churn import Churn, figures, settled
from tests.cluster.local_cluster import LocalCluster
from tests.cluster.support import STEPS, env_for
from tests.executor.support import spawn_worker, wait_until

pytestmark = pytest.mark.anyio


async def reshard_under_load(
    cluster: LocalCluster, keys: Keys, tmp_path: Path, *, moves: int, batch: int
) -> None:
    env = {**env_for(cluster, keys, tmp_path), **{f"SAGA_{s.upper()}_LEASE": "5" for s in STEPS}}
    client = connect(cluster.url, cluster=True)
    await client.initialize()
    await ensure_loaded(client)
    await ensure_groups(client, keys, STEPS)
    churn = Churn(StateMachine(client, keys))
    workers = [spawn_worker(env, tmp_path / f"w{i}.log", STEPS) for i in range(2)]
    asks_before = await anyio.to_thread.run_sync(cluster.error_replies, "ASK")
    tryagain_before = await anyio.to_thread.run_sync(cluster.error_replies, "TRYAGAIN")
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(churn.run)
            for i in range(moves):
                await started_more(churn, 100)  # ~4 s of churn under each layout
                slot = key_slot(keys.ready(i % keys.partitions, "router").encode())
                src = await anyio.to_thread.run_sync(cluster.owner_of_slot, slot)
                dst = (src + 1) % cluster.primaries
                moved = await anyio.to_thread.run_sync(
                    lambda: cluster.migrate_slot(slot, dst, batch=batch, pause_s=0.05)  # noqa: B023
                )
                print(f"\nslot {slot} (partition {i % keys.partitions}): {moved} keys, "
                      f"node {src} -> node {dst}")  # fmt: skip
                assert await anyio.to_thread.run_sync(cluster.owner_of_slot, slot) == dst
            await started_more(churn, 50)  # and after the last move
            churn.stop.set()

        async def done() -> bool:
            assert all(w.alive() for w in workers), [w.tail() for w in workers]
            return await settled(client, keys, churn.acked)

        def tails() -> str:
            return "\n".join(w.tail() for w in workers)

        await wait_until(done, within=60, what="every saga", every=0.5, on_timeout=tails)
        f = await figures(client, keys, churn.acked, workers)
        asks = await anyio.to_thread.run_sync(cluster.error_replies, "ASK") - asks_before
        tryagain = await anyio.to_thread.run_sync(cluster.error_replies, "TRYAGAIN")
        print(f"\nreshard: {f.line()} ask={asks} tryagain={tryagain - tryagain_before}")
        assert f.double_commits == [] and f.lost == []
        assert f.completed == f.started > 0
        assert all(w.logged("attempt_abandoned") == [] for w in workers)
    finally:
        for w in workers:
            w.kill()
        await client.aclose()


async def test_a_busy_partitions_slot_moves_under_load(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    """One partition's slot moves to another primary mid-run, five keys per MIGRATE:
    every saga completes, none is lost or committed twice, no worker gives up."""
    keys = Keys(prefix=f"rs{tmp_path.name[-6:]}", partitions=4)
    await reshard_under_load(cluster, keys, tmp_path, moves=1, batch=5)


@pytest.mark.slow
async def test_every_partition_moves_under_load(cluster: LocalCluster, tmp_path: Path) -> None:
    """Soak: the slots of eight partitions move one after another, two keys per MIGRATE."""
    keys = Keys(prefix=f"rS{tmp_path.name[-6:]}", partitions=8)
    await reshard_under_load(cluster, keys, tmp_path, moves=8, batch=2)


async def started_more(churn: Churn, n: int) -> None:
    """Wait until the churn has started ``n`` more sagas (at its rate of 25 a second)."""
    mark = len(churn.acked)

    async def more() -> bool:
        return len(churn.acked) >= mark + n

    await wait_until(more, within=60, what=f"{n} more sagas started")
