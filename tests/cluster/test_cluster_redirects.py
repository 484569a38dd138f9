"""Redirections while a slot migrates, one command at a time: ASK is followed with
ASKING on the same connection, and a script whose keys are split gets TRYAGAIN until
they are together again, then runs."""

from __future__ import annotations

import uuid
from typing import Any

import anyio
import pytest
from redis.crc import key_slot

from saga.state.connection import TRANSIENT_ERRORS, connect
from tests.cluster.local_cluster import LocalCluster

pytestmark = pytest.mark.anyio


def half_migrate(cluster: LocalCluster, slot: int, dst: int, keys: list[str]) -> int:
    """Put ``slot`` in MIGRATING/IMPORTING and MIGRATE only ``keys``; returns the source."""
    import redis

    src = cluster.owner_of_slot(slot)
    s = redis.Redis(port=cluster.ports[src])
    d = redis.Redis(port=cluster.ports[dst])
    d.execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", cluster.node_id(src))
    s.execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", cluster.node_id(dst))
    s.execute_command("MIGRATE", "127.0.0.1", cluster.ports[dst], "", 0, 5000, "KEYS", *keys)
    s.close()
    d.close()
    return src


def finish_migration(cluster: LocalCluster, slot: int, dst: int) -> None:
    cluster.migrate_slot(slot, dst, batch=100, pause_s=0)


async def test_ask_is_followed_on_the_same_connection_as_its_command(
    cluster: LocalCluster,
) -> None:
    """A key already moved to the importing node is read there through ASK, even when
    the node's pool holds several free connections (redis-py alone sends ASKING on one
    and the command on another, and gives up after 16 MOVED/ASK round trips)."""
    tag = f"{{ask{uuid.uuid4().hex[:6]}}}"
    moved, stays = f"{tag}:moved", f"{tag}:stays"
    slot = key_slot(moved.encode())
    client: Any = connect(cluster.url, cluster=True)
    await client.initialize()
    try:
        await client.set(moved, b"1")
        await client.set(stays, b"2")
        src = cluster.owner_of_slot(slot)
        dst = (src + 1) % cluster.primaries
        for node in client.get_primaries():  # several pooled connections on every node
            await _warm(client, node)
        await anyio.to_thread.run_sync(half_migrate, cluster, slot, dst, [moved])
        for _ in range(5):
            assert await client.get(moved) == b"1"  # ASK: served by the importing node
            assert await client.get(stays) == b"2"  # still served by the source
        await client.set(f"{tag}:new", b"3")  # a new key of a migrating slot: ASK too
        await anyio.to_thread.run_sync(finish_migration, cluster, slot, dst)
        assert await client.get(f"{tag}:new") == b"3"
    finally:
        await client.aclose()


async def _warm(client: Any, node: Any) -> None:
    async with anyio.create_task_group() as tg:
        for _ in range(4):
            tg.start_soon(lambda: client.execute_command("PING", target_nodes=node))


async def test_a_script_with_split_keys_is_refused_until_the_slot_is_whole(
    cluster: LocalCluster,
) -> None:
    """A multi-key call on a half-moved slot is refused with an error the engine re-sends
    (TRYAGAIN, surfaced as TTL exhausted); it runs once the migration ends."""
    tag = f"{{try{uuid.uuid4().hex[:6]}}}"
    a, b = f"{tag}:a", f"{tag}:b"
    slot = key_slot(a.encode())
    client: Any = connect(cluster.url, cluster=True)
    await client.initialize()
    try:
        await client.set(a, b"1")
        await client.set(b, b"2")
        src = cluster.owner_of_slot(slot)
        dst = (src + 1) % cluster.primaries
        await anyio.to_thread.run_sync(half_migrate, cluster, slot, dst, [a])
        script = "return redis.call('GET', KEYS[1]) .. redis.call('GET', KEYS[2])"
        with pytest.raises(TRANSIENT_ERRORS):
            await client.eval(script, 2, a, b)
        await anyio.to_thread.run_sync(finish_migration, cluster, slot, dst)
        assert await client.eval(script, 2, a, b) == b"12"
    finally:
        await client.aclose()
