"""Cursor pages of the saga listing: over several partitions, with sagas created in the
same millisecond, pages in a row give the one-page list exactly once, in order."""

from __future__ import annotations

import uuid
from typing import Any

import anyio
import pytest

from saga.state.errors import InvalidIdError
from saga.state.keys import Keys
from saga.state.listing import Cursor, ListQuery, list_page, list_sagas
from saga.state.machine import StateMachine
from saga.state.model import SagaState
from saga.state.streams import ensure_groups

pytestmark = pytest.mark.anyio


async def pages(client: Any, keys: Keys, q: ListQuery, size: int) -> list[str]:
    seen: list[str] = []
    after = None
    for _ in range(100):
        query = ListQuery(**{**_fields(q), "limit": size, "after": after})
        page = await list_page(client, keys, query)
        seen += [r.record_id for r in page.rows]
        if page.next is None:
            return seen
        after = page.next
    raise AssertionError("the pages never ended")


def _fields(q: ListQuery) -> dict[str, Any]:
    return {f: getattr(q, f) for f in q.__struct_fields__}


async def test_pages_over_partitions_and_ties_cover_the_list_once(redis: Any) -> None:
    """25 sagas over 3 partitions, started in pipelines so many share a millisecond: pages
    of 4 (every index: created, user, state) equal the single page."""
    keys = Keys(prefix=f"t{uuid.uuid4().hex[:10]}", partitions=3)
    await ensure_groups(redis, keys, ["router"])
    sm = StateMachine(redis, keys)
    async with anyio.create_task_group() as tg:  # concurrent starts: shared milliseconds
        for i in range(25):
            tg.start_soon(sm.start, f"r-{i:02d}", "u-1" if i % 2 else "u-2", "router")
    scores = [
        s
        for p in keys.all_partitions()
        for _, s in await redis.zrange(keys.created_index(p), 0, -1, withscores=True)
    ]
    assert len(set(scores)) < len(scores) - 5  # ties, within and across partitions
    for q in (ListQuery(), ListQuery(user="u-1"), ListQuery(state=SagaState.PENDING)):
        one_page = ListQuery(**{**_fields(q), "limit": 100})
        whole = [r.record_id for r in await list_sagas(redis, keys, one_page)]
        assert len(whole) == (12 if q.user == "u-1" else 25)
        assert await pages(redis, keys, q, 4) == whole, q


def test_a_cursor_is_score_and_record_and_refuses_anything_else() -> None:
    """encode/decode round-trip; a cursor that no listing gave is an InvalidIdError."""
    c = Cursor(1796037050394, "mr-2024.0001")
    assert c.encode() == "1796037050394.mr-2024.0001"
    assert Cursor.decode(c.encode()) == c
    for bad in ("", "x.y", "12", "12.", "12.a b", "1" * 19 + ".r"):
        with pytest.raises(InvalidIdError):
            Cursor.decode(bad)
