"""The keyspace's schema version: which key layout its records are in.

A release knows the layouts up to ``CURRENT`` and runs on any from ``OLDEST_RUNNABLE``
(older ones wait for ``saga migrate``). The version is a hash field under the prefix
(a hash, as the partition count is: every ACL user of deploy/redis may HGET and the
loader HSETNX, where only some may SET),
written once by the keyspace's first user (``saga init``, the first worker, controller,
client or command: whoever stores the partition count) and moved forward only by
``saga migrate``. A keyspace made before versions has no such key: it is version 0.

It is checked where the partition count is (``partitions.guard``), so every process
that would read or write records refuses, before it does, a layout it does not know.
"""

from __future__ import annotations

from typing import Any

from saga.state.errors import SchemaVersionError
from saga.state.keys import Keys

CURRENT = 2
"""The newest schema this release reads and writes. 2: history events packed into one
stream field (state/history_codec.py); this release writes them so on a keyspace of 1
as well, and reads both shapes, so it runs on 1 unchanged until ``saga migrate``."""

OLDEST_RUNNABLE = 0
"""The oldest schema this release still runs on unchanged (0: made before versions).
Raised by a release whose code cannot read an older layout: its processes then refuse
until ``saga migrate`` has moved the keyspace to it."""

UNVERSIONED = 0
"""The version of a keyspace with records but no version key (made before versions)."""


async def stored_version(client: Any, keys: Keys) -> int | None:
    """The recorded version, or None if the keyspace has none."""
    raw = await client.hget(keys.schema_version(), "version")
    return None if raw is None else int(raw)


async def read_version(client: Any, keys: Keys) -> int:
    """The keyspace's version, ``UNVERSIONED`` if it has none recorded."""
    found = await stored_version(client, keys)
    return UNVERSIONED if found is None else found


async def record(client: Any, keys: Keys, version: int) -> None:
    """Move the recorded version to ``version`` (``saga migrate``, once its
    migrations to it are all done). Never back: two runs racing here both write the
    version they finished, and a run of a newer release was refused at its start."""
    if await read_version(client, keys) < version:
        await client.hset(keys.schema_version(), "version", version)


async def check(
    client: Any,
    keys: Keys,
    *,
    fresh: bool,
    current: int = CURRENT,
    oldest: int = OLDEST_RUNNABLE,
    migrating: bool = False,
) -> int:
    """The keyspace's version, recorded as ``current`` if the keyspace is ``fresh`` (its
    first user: no partition count was stored). Raises SchemaVersionError if it is newer
    than ``current``, or (unless ``migrating``: ``saga migrate`` itself) older than
    ``oldest``."""
    if fresh:  # a new keyspace is in this release's layout from its first key
        await client.hsetnx(keys.schema_version(), "version", current)
    version = await read_version(client, keys)
    if version > current:
        raise SchemaVersionError(
            f"keyspace {keys.prefix!r} has schema version {version} but this saga knows "
            f"versions up to {current}; upgrade saga to the release that migrated it"
        )
    if version < oldest and not migrating:
        raise SchemaVersionError(
            f"keyspace {keys.prefix!r} has schema version {version} but this saga runs on "
            f"versions {oldest} to {current}; run `saga migrate` first"
        )
    return version
