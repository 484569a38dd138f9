"""The listing's page before (a ``before`` cursor), its order by last change of state,
and the record id search (exact or prefix, under a scan budget), over partitions and
sagas that share a millisecond."""

from __future__ import annotations

import uuid
from typing import Any

import anyio
import pytest

from saga.state.errors import InvalidIdError
from saga.state.keys import Keys
from saga.state.listing import ListQuery, SagaPage, list_page, list_sagas
from saga.state.machine import StateMachine
from saga.state.search import check_prefix, find_prefix
from saga.state.streams import ensure_groups
from tests.state.helpers import claim_next, server_ms, wait_lease_expired

pytestmark = pytest.mark.anyio


async def _many(redis: Any, n: int = 25) -> tuple[Keys, StateMachine]:
    keys = Keys(prefix=f"t{uuid.uuid4().hex[:10]}", partitions=3)
    await ensure_groups(redis, keys, ["router"])
    sm = StateMachine(redis, keys)
    async with anyio.create_task_group() as tg:  # concurrent starts: shared milliseconds
        for i in range(n):
            tg.start_soon(sm.start, f"r-{i:02d}", "u-1" if i % 2 else "u-2", "router")
    return keys, sm


async def test_pages_before_walk_back_to_the_first_page(redis: Any) -> None:
    """Forward pages of 4, then from the last one ``prev`` each time: the same pages in
    reverse, the first of them without a ``prev``; every page keeps a ``next``."""
    keys, _ = await _many(redis)
    for base in (ListQuery(limit=4), ListQuery(limit=4, user="u-1")):
        forward: list[SagaPage] = [await list_page(redis, keys, base)]
        while forward[-1].next is not None:
            q = ListQuery(**{**_fields(base), "after": forward[-1].next})
            forward.append(await list_page(redis, keys, q))
        forward = [p for p in forward if p.rows]
        assert forward[0].prev is None and all(p.prev for p in forward[1:])
        back, page = [], forward[-1]
        while page.prev is not None:
            page = await list_page(redis, keys, ListQuery(**{**_fields(base), "before": page.prev}))
            back.append(page)
        assert [p.rows for p in back] == [p.rows for p in reversed(forward[:-1])], base
        assert back[-1].prev is None and all(p.next for p in back)


async def test_order_by_update_puts_the_latest_change_first(redis: Any) -> None:
    """A saga claimed and failed last comes first by ``updated``, not by ``created``."""
    keys, sm = await _many(redis, 6)
    from saga.state.model import FailAction
    from saga.state.requests import FailRequest

    claim = await claim_next(sm, "router", "w1")
    # a later millisecond than the last start's (the index's score), or the two would tie
    await wait_lease_expired(redis, await server_ms(redis))
    req = FailRequest(action=FailAction.DEAD, error_class="X", error_message="x", worker="w1")
    assert (await sm.fail(claim, req)).code.name == "OK"
    by_update = await list_sagas(redis, keys, ListQuery(order="updated"))
    by_created = await list_sagas(redis, keys, ListQuery())
    assert by_update[0].record_id == claim.record_id != by_created[0].record_id
    assert sorted(r.record_id for r in by_update) == sorted(r.record_id for r in by_created)
    assert len(by_update) == 6


async def test_a_prefix_finds_its_sagas_newest_first_and_glob_characters_are_refused(
    redis: Any,
) -> None:
    """``r-1`` finds r-10..r-19 (newest created first), ``r-`` hits the limit (more),
    a budget smaller than the index says the search is incomplete."""
    keys, _ = await _many(redis)
    found = await find_prefix(redis, keys, "r-1")
    assert sorted(r.record_id for r in found.rows) == [f"r-{i}" for i in range(10, 20)]
    created = [r.created_ms for r in found.rows]
    assert created == sorted(created, reverse=True) and found.complete and not found.more
    some = await find_prefix(redis, keys, "r-", limit=5)
    assert len(some.rows) == 5 and some.more
    assert not (await find_prefix(redis, keys, "r-", budget=1)).complete  # 1 of 3 partitions
    for bad in ("r*", "r?", "[r]", "", "x" * 129, "a b"):
        with pytest.raises(InvalidIdError):
            check_prefix(bad)


def _fields(q: ListQuery) -> dict[str, Any]:
    return {f: getattr(q, f) for f in q.__struct_fields__}
