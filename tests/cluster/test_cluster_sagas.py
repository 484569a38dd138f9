"""The engine on a Redis Cluster: three primaries on this machine, four partitions
spread over them, a real `saga worker` with SAGA_REDIS_CLUSTER=1.

Every script touches keys of one partition's hash tag only, so each runs on the node
that owns that tag; the worker reads each partition's streams with its own
XREADGROUP, and sends commit batches through redis-py's cluster pipeline, which
splits them by node (the single-node fast path needs one connection)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest

from saga.state.keys import Keys
from saga.state.model import EventType, SagaState
from saga.state.reads import get_saga_and_history
from tests.cluster.local_cluster import LocalCluster
from tests.cluster.support import STEPS, all_in, assert_one_commit_per_step, env_for, start_sagas
from tests.executor.support import REPO, spawn_worker, wait_until

pytestmark = pytest.mark.anyio


async def test_partitions_live_on_different_nodes(client: Any, keys: Keys) -> None:
    """The test below means something only if the partitions' tags span the nodes."""
    owners = {client.get_node_from_key(keys.ready(p, "router")).port for p in range(4)}
    assert len(owners) >= 2
    # Every node's connections survive a close mid-write (see tests/state/test_connection_races)
    # pack with hiredis, and send ASKING with the command it is for (test_cluster_redirects).
    classes = {n.connection_class.__name__ for n in client.get_nodes()}
    assert classes == {"AskingSafeHiredisCloseRaceSafeConnection"}


async def test_sagas_complete_on_a_cluster_with_a_retry_and_the_cli_shows_them(
    cluster: LocalCluster, client: Any, keys: Keys, tmp_path: Path
) -> None:
    rids = [f"ok-{i:03d}" for i in range(40)] + ["once-a", "once-b"]
    await start_sagas(client, keys, rids)
    assert len({keys.partition_of(r) for r in rids}) == 4

    env = env_for(cluster, keys, tmp_path)
    worker = spawn_worker(env, tmp_path / "worker.log", STEPS)
    try:

        async def all_completed() -> bool:
            assert worker.alive(), worker.tail()
            return await all_in(client, keys, rids, SagaState.COMPLETED)

        await wait_until(
            all_completed, within=60, what="every saga completed", on_timeout=worker.tail
        )
    finally:
        worker.kill()

    await assert_one_commit_per_step(client, keys, rids)
    for rid in rids:
        _, events = await get_saga_and_history(client, keys, rid)
        assert EventType.FENCED not in [e.event for e in events]
    _, once = await get_saga_and_history(client, keys, "once-a")
    assert EventType.RETRY_SCHEDULED in [e.event for e in once]

    shown = await anyio.run_process(
        [sys.executable, "-m", "saga.cli.main", "show", "once-b", "--json"],
        cwd=REPO, env=env, check=False,
    )  # fmt: skip
    assert shown.returncode == 0, shown.stderr.decode()
    doc = msgspec.json.decode(shown.stdout)
    assert doc["saga"]["state"] == "completed"


async def test_scripts_flushed_from_every_node_are_loaded_again(client: Any, keys: Keys) -> None:
    """After SCRIPT FLUSH on every primary (a failover to a fresh node looks alike), a
    claim and a batch of commits through the cluster pipeline reload and run."""
    from saga.state.keys import GROUP
    from saga.state.requests import CommitRequest

    rids = [f"flush-{i}" for i in range(8)]
    sm = await start_sagas(client, keys, rids)
    claims = []
    for p in keys.all_partitions():  # each partition on its node, as the executor reads
        reply = await client.xreadgroup(GROUP, "w-a", {keys.ready(p, "router"): ">"}, count=100)
        pairs = [(i.decode(), f[b"rid"].decode()) for _, rows in reply or [] for i, f in rows]
        outs = await sm.claim(
            "router", p, pairs, worker="w-a", lease_ms=30_000, max_lease_expiries=3
        )
        claims += [o.claim for o in outs if o.claim is not None]
    assert len(claims) == len(rids)
    await client.script_flush()
    req = CommitRequest(output=b"{}", next_step="parser", worker="w-a")
    outcomes = await sm.finish_many([(c, req) for c in claims])
    assert {o.code for o in outcomes} == {0}
    for rid in rids:
        saga, _ = await get_saga_and_history(client, keys, rid)
        assert (saga.state, saga.step) == (SagaState.PENDING, "parser")


async def test_work_on_one_partition_is_not_held_behind_empty_ones(
    cluster: LocalCluster, client: Any, tmp_path: Path
) -> None:
    """A saga whose partition comes last of eight completes in well under one
    SAGA_BLOCK_MS per empty partition: empty partitions do not hold the reader (one
    blocking read per partition in turn took 7 x 2 s per step to reach it)."""
    import time

    keys = Keys(prefix=f"c{tmp_path.name[-8:]}", partitions=8)
    rid = next(r for r in (f"late-{i}" for i in range(999)) if keys.partition_of(r) == 7)
    await start_sagas(client, keys, [])
    env = {**env_for(cluster, keys, tmp_path), "SAGA_BLOCK_MS": "2000",
           "SAGA_RECOVERY_INTERVAL": "60"}  # fmt: skip
    worker = spawn_worker(env, tmp_path / "worker.log", STEPS)
    try:
        await worker.wait_ready(within=120)
        await start_sagas(client, keys, [rid])
        began = time.monotonic()

        async def completed() -> bool:
            assert worker.alive(), worker.tail()
            return await all_in(client, keys, [rid], SagaState.COMPLETED)

        await wait_until(completed, within=60, what="the saga", on_timeout=worker.tail)
        assert time.monotonic() - began < 6.0
    finally:
        worker.kill()
