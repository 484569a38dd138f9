"""``saga migrate``'s migrations: an ordered list, each moving the keyspace towards a
schema version in bounded batches, online, resumable and idempotent.

A migration is a function from a cursor (where its next batch starts; ``""`` at the
start) to one ``Batch``: what it changed (or, in a dry run, would change) and the next
cursor, ``""`` when it is done. After every applied batch the cursor is stored in
``keys.migrations()``, so a run killed between batches resumes at the batch it was
in; each batch is written so that running it twice changes nothing the second time.
When every migration to a version is done, the keyspace's version is moved to it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import msgspec

from saga.state import schema_version
from saga.state.keys import Keys
from saga.state.replies import text

BATCH = 500
"""Items one batch reads (one HSCAN's COUNT): a bounded round trip."""


class Batch(msgspec.Struct, frozen=True):
    changed: int
    """Items this batch changed (a dry run: would change)."""
    cursor: str
    """Where the next batch starts; ``""``: the migration is done."""


Run = Callable[[Any, Keys, str, int, bool], Awaitable[Batch]]
"""``(client, keys, cursor, batch, apply) -> Batch``."""


@dataclass(frozen=True)
class Migration:
    id: str
    to: int
    """The schema version the keyspace has once this and every earlier one are done."""
    summary: str
    run: Run


class MigrationResult(msgspec.Struct, kw_only=True):
    id: str
    to: int
    summary: str
    changed: int
    """Items changed (a dry run: that would be)."""
    batches: int
    already_done: bool = False
    """Done by an earlier run: skipped."""


class MigrateReport(msgspec.Struct, kw_only=True):
    """``saga migrate --json``."""

    dry_run: bool
    from_version: int
    """The keyspace's schema version before this run."""
    to_version: int
    """After it (a dry run: what it would be)."""
    current: int
    """The newest version this release knows."""
    migrations: list[MigrationResult]


async def _move_hash(
    client: Any, old: str, new: str | None, cursor: str, batch: int, apply: bool
) -> Batch:
    """One batch of moving ``old``'s fields to ``new`` (HSETNX: a field already under
    ``new`` wins) or, with ``new`` None, deleting them. HSCAN returns every field present
    for the whole scan even while returned ones are deleted, so the cursor stays valid."""
    nxt, found = await client.hscan(old, int(cursor or 0), count=batch)
    if found and apply:
        # no MULTI (the ACL users of deploy/redis lack it): a kill between the two leaves
        # a field in both, which the batch run again moves as a no-op and deletes
        pipe = client.pipeline(transaction=False)
        if new is not None:
            for field, raw in found.items():
                pipe.hsetnx(new, field, raw)
        pipe.hdel(old, *found)
        await pipe.execute()
    return Batch(len(found), "" if int(nxt) == 0 else str(nxt))


async def _budgets(client: Any, keys: Keys, cursor: str, batch: int, apply: bool) -> Batch:
    return await _move_hash(client, keys.legacy_budgets(), keys.budgets(), cursor, batch, apply)


async def _old_tokens(client: Any, keys: Keys, cursor: str, batch: int, apply: bool) -> Batch:
    return await _move_hash(client, keys.legacy_console_tokens(), None, cursor, batch, apply)


async def _pack_histories(client: Any, keys: Keys, cursor: str, batch: int, apply: bool) -> Batch:
    from saga.state.migrate_history import pack_histories

    changed, nxt = await pack_histories(client, keys, cursor, batch, apply)
    return Batch(changed, nxt)


MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        "budgets-to-ops-prefix",
        1,
        "move per-user budgets from saga:budgets to the operators' prefix",
        _budgets,
    ),
    Migration(
        "drop-old-console-tokens",
        1,
        "delete console tokens of the old scheme (no longer valid; mint new ones)",
        _old_tokens,
    ),
    Migration(
        "pack-history-events",
        2,
        "repack each history's events of the old shape (a stream field per name) into one "
        "field (schema 2)",
        _pack_histories,
    ),
)
"""In the order they run; versions never decrease along the list."""


Progress = Callable[[Migration, int, int], None]
"""Called after every batch with the migration, batches so far and items changed."""


async def migrate(
    client: Any,
    keys: Keys,
    *,
    apply: bool,
    batch: int = BATCH,
    migrations: tuple[Migration, ...] = MIGRATIONS,
    current: int = schema_version.CURRENT,
    progress: Progress | None = None,
) -> MigrateReport:
    """Run (``apply``) or count (a dry run) every migration the keyspace still needs."""
    start = await schema_version.read_version(client, keys)
    results: list[MigrationResult] = []
    version = start
    pending = [m for m in migrations if m.to > start and m.to <= current]
    for i, m in enumerate(pending):
        done, cursor = await client.hmget(keys.migrations(), f"{m.id}:done", f"{m.id}:cursor")
        if done:
            results.append(
                MigrationResult(
                    id=m.id, to=m.to, summary=m.summary, changed=0, batches=0, already_done=True
                )
            )
        else:
            results.append(
                await _run_one(
                    client, keys, m, text(cursor) if cursor else "", batch, apply, progress
                )
            )
        last_of_version = i + 1 == len(pending) or pending[i + 1].to > m.to
        if last_of_version:
            version = m.to
            if apply:
                await schema_version.record(client, keys, m.to)
    return MigrateReport(
        dry_run=not apply,
        from_version=start,
        to_version=max(version, start),
        current=current,
        migrations=results,
    )


async def _run_one(
    client: Any,
    keys: Keys,
    m: Migration,
    cursor: str,
    batch: int,
    apply: bool,
    progress: Progress | None,
) -> MigrationResult:
    changed = batches = 0
    while True:  # bounded: every batch advances the cursor of a finite scan
        b = await m.run(client, keys, cursor, batch, apply)
        changed, batches, cursor = changed + b.changed, batches + 1, b.cursor
        if apply:
            fields = {f"{m.id}:cursor": cursor} if cursor else {f"{m.id}:done": 1}
            await client.hset(keys.migrations(), mapping=fields)
        if progress is not None:
            progress(m, batches, changed)
        if not cursor:
            return MigrationResult(
                id=m.id, to=m.to, summary=m.summary, changed=changed, batches=batches
            )
