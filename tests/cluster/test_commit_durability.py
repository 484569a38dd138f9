"""SAGA_COMMIT_DURABILITY=replica: a batch of commits is followed by one WAIT per node it
wrote to, in the same pipeline, never one per commit; with ``local`` no WAIT is sent."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from saga.state.connection import NotReplicatedError
from saga.state.keys import GROUP, Keys
from saga.state.limits import StateLimits
from saga.state.machine import StateMachine
from saga.state.model import Claim
from saga.state.requests import CommitRequest
from tests.cluster.local_cluster import LocalCluster
from tests.cluster.support import start_sagas

pytestmark = pytest.mark.anyio


def waits(cluster: LocalCluster) -> int:
    """WAIT calls served so far by every running node (INFO commandstats)."""
    total = 0
    for i, proc in enumerate(cluster.procs):
        if proc.poll() is None:
            stat: Any = cluster.info(i, "commandstats").get("cmdstat_wait", {})
            total += int(stat.get("calls", 0))
    return total


async def claimed(sm: StateMachine, client: Any, keys: Keys) -> list[Claim]:
    claims = []
    for p in keys.all_partitions():
        reply = await client.xreadgroup(GROUP, "w", {keys.ready(p, "router"): ">"}, count=100)
        pairs = [(i.decode(), f[b"rid"].decode()) for _, rows in reply or [] for i, f in rows]
        outs = await sm.claim("router", p, pairs, worker="w", lease_ms=30_000, max_lease_expiries=3)
        claims += [o.claim for o in outs if o.claim is not None]
    return claims


@pytest.mark.parametrize("replicas", [0, 1])
async def test_one_wait_per_node_and_batch(replicated: LocalCluster, replicas: int) -> None:
    """16 commits over 8 partitions on 3 primaries cost 3 WAITs with durability=replica
    (one per node, riding in the batch's pipeline) and none with durability=local."""
    from saga.state.connection import connect

    keys = Keys(prefix=f"d{uuid.uuid4().hex[:8]}", partitions=8)
    client = connect(replicated.url, cluster=True)
    await client.initialize()
    try:
        sm = StateMachine(client, keys, StateLimits(commit_replicas=replicas))
        await start_sagas(client, keys, [f"w-{i}" for i in range(16)])
        claims = await claimed(sm, client, keys)
        nodes = {client.get_node_from_key(keys.ready(p, "router")).name for p in range(8)}
        before = waits(replicated)
        req = CommitRequest(output=b"{}", next_step="parser", worker="w")
        outcomes = await sm.finish_many([(c, req) for c in claims])
        assert [o.code for o in outcomes] == [0] * 16
        assert waits(replicated) - before == (len(nodes) if replicas else 0)
        assert len(nodes) == 3
    finally:
        await client.aclose()


async def test_a_batch_no_replica_acknowledged_raises_and_sent_one_wait(
    redis: Any, keys: Keys
) -> None:
    """On a server without replicas, durability=replica makes a batch of five commits
    fail with NotReplicatedError after a single WAIT (it is re-sent by the committer)."""
    from saga.state.scripts import ensure_loaded
    from saga.state.streams import ensure_groups

    await ensure_loaded(redis)
    await ensure_groups(redis, keys, ["router", "parser"])
    plain = StateMachine(redis, keys)
    for i in range(5):
        await plain.start(f"n-{i}", "u1", "router")
    sm = StateMachine(redis, keys, StateLimits(commit_replicas=1, replica_wait_ms=50))
    claims = await claimed(sm, redis, keys)
    stat = (await redis.info("commandstats")).get("cmdstat_wait", {})
    before = int(stat.get("calls", 0))
    req = CommitRequest(output=b"{}", next_step="parser", worker="w")
    with pytest.raises(NotReplicatedError):
        await sm.finish_many([(c, req) for c in claims], attempts=1)
    stat = (await redis.info("commandstats")).get("cmdstat_wait", {})
    assert int(stat.get("calls", 0)) - before == 1
    with pytest.raises(NotReplicatedError):  # a start is acknowledged only once replicated
        await sm.start("n-late", "u1", "router")
