"""``saga migrate``'s framework against a real server: dry run, bounded batches, the
version moved once done, resumable after a kill between batches, idempotent re-runs."""

from __future__ import annotations

from typing import Any

import pytest

from saga.state import migrations, schema_version
from saga.state.keys import Keys
from saga.state.migrations import Migration, migrate

pytestmark = pytest.mark.anyio

BUDGETS = 1500  # above hash-max-listpack-entries (512), so HSCAN returns it in batches


async def _old_keyspace(redis: Any, keys: Keys) -> dict[str, str]:
    """A keyspace of a release before versions: partition count, budgets at the old key."""
    await redis.hset(keys.partition_count(), "count", keys.partitions)
    budgets = {f"u{i}": f'{{"daily": {i}}}' for i in range(BUDGETS)}
    await redis.hset(keys.legacy_budgets(), mapping=budgets)
    await redis.hset(keys.legacy_console_tokens(), mapping={"a" * 64: "x", "b" * 64: "y"})
    return budgets


async def test_dry_run_counts_and_writes_nothing(redis: Any, keys: Keys) -> None:
    await _old_keyspace(redis, keys)
    report = await migrate(redis, keys, apply=False, batch=200)
    assert report.dry_run and report.from_version == 0 and report.to_version == 2
    assert [r.changed for r in report.migrations] == [BUDGETS, 2, 0]  # no sagas: no history
    assert report.migrations[0].batches > 1
    assert await redis.hlen(keys.legacy_budgets()) == BUDGETS
    assert not await redis.exists(keys.budgets(), keys.migrations(), keys.schema_version())


async def test_migrate_moves_everything_then_records_the_version(redis: Any, keys: Keys) -> None:
    budgets = await _old_keyspace(redis, keys)
    await redis.hset(keys.budgets(), "u1", "set-by-an-operator")  # the new key wins
    report = await migrate(redis, keys, apply=True, batch=200)
    assert report.to_version == 2 == await schema_version.read_version(redis, keys)
    moved = {k.decode(): v.decode() for k, v in (await redis.hgetall(keys.budgets())).items()}
    assert moved == {**budgets, "u1": "set-by-an-operator"}
    assert not await redis.exists(keys.legacy_budgets(), keys.legacy_console_tokens())
    again = await migrate(redis, keys, apply=True, batch=200)
    assert again.migrations == [] and again.from_version == again.to_version == 2


class Killed(Exception):
    pass


async def test_a_run_killed_between_batches_resumes_and_loses_nothing(
    redis: Any, keys: Keys
) -> None:
    budgets = await _old_keyspace(redis, keys)

    def kill_after_two(m: Migration, batches: int, changed: int) -> None:
        if batches == 2:
            raise Killed

    with pytest.raises(Killed):
        await migrate(redis, keys, apply=True, batch=200, progress=kill_after_two)
    cursor = await redis.hget(keys.migrations(), "budgets-to-ops-prefix:cursor")
    assert cursor and cursor != b"0"  # stored: the next run starts there, not at 0
    assert await schema_version.read_version(redis, keys) == 0  # not done: not recorded
    first = await redis.hlen(keys.budgets())
    assert 0 < first < BUDGETS
    seen: list[int] = []
    report = await migrate(
        redis, keys, apply=True, batch=200, progress=lambda m, b, c: seen.append(c)
    )
    assert report.migrations[0].changed == BUDGETS - first  # only what was left
    assert await redis.hlen(keys.budgets()) == BUDGETS
    moved = {k.decode(): v.decode() for k, v in (await redis.hgetall(keys.budgets())).items()}
    assert moved == budgets
    assert await schema_version.read_version(redis, keys) == 2


async def test_a_fresh_keyspace_has_nothing_to_migrate(redis: Any, keys: Keys) -> None:
    await schema_version.check(redis, keys, fresh=True)
    report = await migrate(redis, keys, apply=True)
    assert report.migrations == [] and report.to_version == schema_version.CURRENT


def test_migrations_are_in_version_order() -> None:
    tos = [m.to for m in migrations.MIGRATIONS]
    assert tos == sorted(tos) and max(tos) == schema_version.CURRENT
    assert len({m.id for m in migrations.MIGRATIONS}) == len(tos)
