"""Schema 2's migration against a real server: histories of the old shape (a stream field
per name) repacked into one field, with the same ids and events; a dry run counts and
writes nothing; a run killed after any batch resumes and ends the same; a re-run, and a
run over histories already packed, rewrites nothing."""

from __future__ import annotations

from typing import Any

import pytest

from saga.state import schema_version
from saga.state.history_codec import event_fields, is_packed
from saga.state.keys import Keys
from saga.state.machine import StateMachine
from saga.state.migrations import Migration, migrate
from tests.upgrade.test_migrations import Killed

pytestmark = pytest.mark.anyio

RECORDS = 200  # above zset-max-listpack-entries: ZSCAN walks the created index in batches
ID = "pack-history-events"


async def _v1_keyspace(redis: Any, keys: Keys) -> dict[str, list[Any]]:
    """A keyspace of schema 1 whose histories hold old-shape events (the first record's
    one packed, as this release's workers write them there), and their events."""
    await schema_version.check(redis, keys, fresh=True, current=1)
    sm = StateMachine(redis, keys)
    for i in range(RECORDS):
        await sm.start(f"r-{i}", "u-1", "router")
    for i in range(1, RECORDS):  # the old shape, same ids; a value that is not UTF-8
        await redis.xadd(keys.history(f"r-{i}"), {"e": "cancelled", "t": "5", "x": b"no\xff"})
        hist = keys.history(f"r-{i}")
        rows = await redis.xrange(hist)
        await redis.delete(hist)
        for entry_id, fields in rows:
            await redis.xadd(hist, event_fields(fields), id=entry_id)
    return {f"r-{i}": await _events(redis, keys, f"r-{i}") for i in range(RECORDS)}


async def _events(redis: Any, keys: Keys, record: str) -> list[Any]:
    return [(i, event_fields(f)) for i, f in await redis.xrange(keys.history(record))]


async def _all_packed(redis: Any, keys: Keys) -> bool:
    for i in range(RECORDS):
        if not all(is_packed(f) for _, f in await redis.xrange(keys.history(f"r-{i}"))):
            return False
    return True


async def test_dry_run_counts_the_histories_and_writes_nothing(redis: Any, keys: Keys) -> None:
    """Every history but the packed one would change; nothing is written, nor the
    version moved."""
    before = await _v1_keyspace(redis, keys)
    report = await migrate(redis, keys, apply=False, batch=50)
    assert report.dry_run and (report.from_version, report.to_version) == (1, 2)
    (result,) = report.migrations
    assert result.id == ID and result.changed == RECORDS - 1
    assert {r: await _events(redis, keys, r) for r in before} == before
    assert await schema_version.read_version(redis, keys) == 1
    assert not await redis.exists(keys.migrations())


@pytest.mark.parametrize("kill_at", [1, 2, 3])
async def test_a_run_killed_after_any_batch_resumes_to_the_same_end(
    redis: Any, keys: Keys, kill_at: int
) -> None:
    """Killed after batch k (records visited ~50 at a time), the next run starts at the
    stored cursor; in the end every history is packed, each event with its id, names
    and values as before, and the version is 2. A re-run changes nothing."""
    before = await _v1_keyspace(redis, keys)

    def kill(m: Migration, batches: int, changed: int) -> None:
        if batches == kill_at:
            raise Killed

    with pytest.raises(Killed):
        await migrate(redis, keys, apply=True, batch=50, progress=kill)
    assert await redis.hget(keys.migrations(), f"{ID}:cursor")
    assert await schema_version.read_version(redis, keys) == 1
    report = await migrate(redis, keys, apply=True, batch=50)
    assert report.to_version == 2 == await schema_version.read_version(redis, keys)
    assert await _all_packed(redis, keys)
    assert {r: await _events(redis, keys, r) for r in before} == before
    again = await migrate(redis, keys, apply=True, batch=50)
    assert again.migrations == [] and again.to_version == 2


async def test_a_batch_run_twice_rewrites_nothing_the_second_time(redis: Any, keys: Keys) -> None:
    """The migration's progress forgotten (as if killed before it was stored), the whole
    migration runs again: the histories packed by the first run are left alone."""
    await _v1_keyspace(redis, keys)
    await migrate(redis, keys, apply=True, batch=4)
    ids = {i: await redis.xinfo_stream(keys.history(f"r-{i}")) for i in range(RECORDS)}
    await redis.delete(keys.migrations())
    await redis.hset(keys.schema_version(), "version", 1)
    report = await migrate(redis, keys, apply=True, batch=4)
    assert report.migrations[0].changed == 0
    after = {i: await redis.xinfo_stream(keys.history(f"r-{i}")) for i in range(RECORDS)}
    assert after == ids
