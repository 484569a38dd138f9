"""The partition guard: a keyspace's partition count is stored in it, and a process
configured with another count refuses to run.

A record lives in ``crc32(record_id) % partitions``: a worker or client with another
count would look for records where they are not, and start duplicates of them there.
The count is stored by ``saga init``, or by the first worker, client or command that
finds none; ``saga partitions migrate --to N`` is the only way to change it.
"""

from __future__ import annotations

from typing import Any

import msgspec

from saga.state import schema_version
from saga.state.errors import PartitionCountError
from saga.state.keys import Keys
from saga.state.replies import text


class StoredCount(msgspec.Struct, frozen=True):
    count: int
    """The partition count records are laid out by."""
    migrating_to: int = 0
    """While a migration runs: the count it moves records to (0: none)."""
    op: str = ""


async def stored_count(client: Any, keys: Keys) -> StoredCount | None:
    count, to, op = await client.hmget(keys.partition_count(), "count", "to", "op")
    if count is None:
        return None
    return StoredCount(int(count), int(to or 0), text(op) if op else "")


async def guard(client: Any, keys: Keys, *, migrating: bool = False) -> int:
    """Store ``keys.partitions`` if the keyspace has no count yet; raise
    PartitionCountError if it has another, or a migration is under way, and
    SchemaVersionError if its schema version is not one this release runs on (with
    ``migrating``, ``saga migrate``'s own start: only a newer one). Returns the count."""
    stored = await stored_count(client, keys)
    await schema_version.check(client, keys, fresh=stored is None, migrating=migrating)
    if stored is None:  # first use: written only then (a read-only user can still read)
        await client.hsetnx(keys.partition_count(), "count", keys.partitions)
        stored = await stored_count(client, keys)
        assert stored is not None  # just set, or set by another process meanwhile
    if stored.migrating_to:
        raise PartitionCountError(
            f"keyspace {keys.prefix!r} is being migrated from {stored.count} to "
            f"{stored.migrating_to} partitions; wait for `saga partitions migrate "
            f"--to {stored.migrating_to}` to finish, then set SAGA_PARTITIONS="
            f"{stored.migrating_to}"
        )
    if stored.count != keys.partitions:
        raise PartitionCountError(
            f"keyspace {keys.prefix!r} has {stored.count} partition(s) but SAGA_PARTITIONS="
            f"{keys.partitions}; set SAGA_PARTITIONS={stored.count}, or move the records "
            f"with `saga partitions migrate --to {keys.partitions}`"
        )
    return stored.count
