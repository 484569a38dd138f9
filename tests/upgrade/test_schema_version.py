"""The keyspace's schema version: recorded by its first user, and checked by every
process at start against a real server (state/schema_version.py)."""

from __future__ import annotations

from typing import Any

import pytest

from saga.state import partitions, schema_version
from saga.state.errors import SchemaVersionError
from saga.state.keys import Keys

pytestmark = pytest.mark.anyio


async def test_the_first_user_records_this_releases_version(redis: Any, keys: Keys) -> None:
    await partitions.guard(redis, keys)
    assert await schema_version.stored_version(redis, keys) == schema_version.CURRENT


async def test_a_keyspace_made_before_versions_is_version_0_and_runs(
    redis: Any, keys: Keys
) -> None:
    """An older release stored the partition count but no version: this one runs on it
    (version 0 is runnable) and does not claim it is newer than it is."""
    await redis.hset(keys.partition_count(), "count", keys.partitions)
    assert await partitions.guard(redis, keys) == keys.partitions
    assert await schema_version.stored_version(redis, keys) is None
    assert await schema_version.read_version(redis, keys) == 0


async def test_a_newer_schema_is_refused_naming_both_versions(redis: Any, keys: Keys) -> None:
    newer = schema_version.CURRENT + 1
    await redis.hset(keys.schema_version(), "version", newer)
    with pytest.raises(SchemaVersionError) as caught:
        await partitions.guard(redis, keys)
    message = str(caught.value)
    assert f"version {newer}" in message and f"up to {schema_version.CURRENT}" in message
    assert "upgrade saga" in message
    with pytest.raises(SchemaVersionError):  # saga migrate refuses it too
        await partitions.guard(redis, keys, migrating=True)


async def test_a_schema_older_than_runnable_asks_for_saga_migrate(redis: Any, keys: Keys) -> None:
    """A release whose oldest runnable version is above the keyspace's refuses, except
    for ``saga migrate`` itself."""
    await redis.hset(keys.schema_version(), "version", 1)
    with pytest.raises(SchemaVersionError, match="run `saga migrate` first"):
        await schema_version.check(redis, keys, fresh=False, current=3, oldest=2)
    assert (
        await schema_version.check(redis, keys, fresh=False, current=3, oldest=2, migrating=True)
        == 1
    )
    assert await schema_version.check(redis, keys, fresh=False, current=3, oldest=1) == 1


async def test_record_never_moves_the_version_back(redis: Any, keys: Keys) -> None:
    await schema_version.record(redis, keys, 3)
    await schema_version.record(redis, keys, 2)
    assert await schema_version.read_version(redis, keys) == 3
