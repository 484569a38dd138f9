"""Keys of older releases that ``saga init`` moves or drops, online and bounded.

Since the keys were split by who may write them (state/keys.py), budgets live under the
operators' prefix (``saga/ops:budgets``) and console tokens under the console's, keyed by
an HMAC under the console's secret. A keyspace made by an older release still has:

- ``saga:budgets``: moved field by field (HSCAN in batches; HSETNX, so a budget already
  set under the new key wins; then HDEL), so a second run, or one that races an
  operator's ``saga budget set``, loses nothing.
- ``saga:console:tokens``: sha256-keyed tokens that any writer of ``saga:*`` could have
  added; none can be carried over as trusted, so they are deleted (mint new ones).
"""

from __future__ import annotations

from typing import Any

import msgspec

from saga.state.keys import Keys

BATCH = 500
"""Budgets moved per round trip."""


class Upgraded(msgspec.Struct, frozen=True):
    budgets_moved: int
    """Budgets moved from ``saga:budgets`` to the operators' prefix."""
    console_tokens_dropped: int
    """Console tokens of the old scheme deleted (they are no longer valid)."""


async def upgrade_keys(client: Any, keys: Keys, *, batch: int = BATCH) -> Upgraded:
    moved = await _move_budgets(client, keys, batch)
    old_tokens = keys.legacy_console_tokens()
    dropped = int(await client.hlen(old_tokens))
    if dropped:
        await client.delete(old_tokens)
    return Upgraded(moved, dropped)


async def _move_budgets(client: Any, keys: Keys, batch: int) -> int:
    old, new = keys.legacy_budgets(), keys.budgets()
    moved = 0
    while True:  # each pass removes what it read, so cursor 0 again is the whole rest
        _, found = await client.hscan(old, 0, count=batch)
        if not found:
            return moved
        pipe = client.pipeline(transaction=False)
        for user, raw in found.items():
            pipe.hsetnx(new, user, raw)
        pipe.hdel(old, *found)
        await pipe.execute()
        moved += len(found)
