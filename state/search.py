"""Finding sagas by record id: the exact id (one hash read) or an id prefix, read from
the created indexes with ``ZSCAN … MATCH`` under a budget of entries examined (an
index may hold millions; the scan never blocks Redis, each call reads ``COUNT``)."""

from __future__ import annotations

from typing import Any

import msgspec

from saga.state.errors import InvalidIdError
from saga.state.ids import MAX_ID_LENGTH
from saga.state.keys import Keys
from saga.state.listing import SagaRow, rows_of
from saga.state.replies import text

SCAN_COUNT = 1000
"""Entries ZSCAN examines per call."""
SCAN_BUDGET = 200_000
"""Entries examined at most, over every partition, for one prefix search."""
_PREFIX_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._:@+=-")


class SearchResult(msgspec.Struct, frozen=True):
    rows: list[SagaRow]
    """The matching sagas, newest created first, at most the limit asked."""
    more: bool
    """More sagas match than were returned."""
    complete: bool
    """Every index entry was examined (else the budget ran out: narrow the prefix)."""


def check_prefix(prefix: str) -> str:
    """A record id prefix: the characters of a record id, at most its length."""
    if not prefix or len(prefix) > MAX_ID_LENGTH or not set(prefix) <= _PREFIX_CHARS:
        raise InvalidIdError(
            f"search {prefix[:40]!r}: give a record id or its start (letters, digits and "
            "._:@+=-, up to 128 characters)"
        )
    return prefix


async def find_prefix(
    client: Any, keys: Keys, prefix: str, limit: int = 50, budget: int = SCAN_BUDGET
) -> SearchResult:
    """The sagas whose record id starts with ``prefix`` (no glob character can be in
    one: ``check_prefix``), newest created first."""
    pattern = check_prefix(prefix) + "*"
    found: list[tuple[float, str]] = []
    examined, complete = 0, True
    for p in keys.all_partitions():
        index, cursor = keys.created_index(p), 0
        while complete:
            if examined >= budget:
                complete = False
                break
            cursor, entries = await client.zscan(index, cursor, match=pattern, count=SCAN_COUNT)
            found.extend((score, text(member)) for member, score in entries)
            examined += SCAN_COUNT
            if int(cursor) == 0:
                break
    found.sort(key=lambda e: (e[0], e[1]), reverse=True)
    rows = await rows_of(client, keys, [rid for _, rid in found[:limit]])
    return SearchResult(rows, len(found) > limit, complete)
