"""SAGA_COMMIT_DURABILITY=fsync on a cluster: the check reads every primary's
``appendfsync`` (one under ``everysec`` is refused), and a batch of commits over eight
partitions on three primaries sends one WAITAOF per primary it wrote to."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from saga.state.durability import check_durability
from saga.state.errors import DurabilityError
from saga.state.keys import Keys
from saga.state.limits import StateLimits
from saga.state.machine import StateMachine
from saga.state.requests import CommitRequest
from tests.cluster.local_cluster import LocalCluster
from tests.cluster.support import start_sagas
from tests.cluster.test_commit_durability import claimed

pytestmark = pytest.mark.anyio

FSYNC = StateLimits(commit_fsync=True)


def waitaofs(cluster: LocalCluster) -> int:
    total = 0
    for i, proc in enumerate(cluster.procs):
        if proc.poll() is None:
            stat: Any = cluster.info(i, "commandstats").get("cmdstat_waitaof", {})
            total += int(stat.get("calls", 0))
    return total


async def test_every_primary_checked_and_one_waitaof_per_node(
    cluster: LocalCluster, client: Any
) -> None:
    keys = Keys(prefix=f"d{uuid.uuid4().hex[:8]}", partitions=8)
    primaries = client.get_primaries()
    await client.config_set("appendfsync", "always", target_nodes=client.PRIMARIES)
    try:
        await check_durability(client, FSYNC)
        await client.config_set("appendfsync", "everysec", target_nodes=[primaries[1]])
        with pytest.raises(DurabilityError, match="appendfsync everysec"):
            await check_durability(client, FSYNC)
        await client.config_set("appendfsync", "always", target_nodes=[primaries[1]])

        await start_sagas(client, keys, [f"w-{i}" for i in range(16)])
        sm = StateMachine(client, keys, FSYNC)
        claims = await claimed(sm, client, keys)
        nodes = {client.get_node_from_key(keys.ready(p, "router")).name for p in range(8)}
        before = waitaofs(cluster)
        req = CommitRequest(output=b"{}", next_step="parser", worker="w")
        outcomes = await sm.finish_many([(c, req) for c in claims])
        assert [o.code for o in outcomes] == [0] * 16
        assert waitaofs(cluster) - before == len(nodes) == 3
    finally:
        await client.config_set("appendfsync", "everysec", target_nodes=client.PRIMARIES)
