"""A malformed record id in an index (anything with write access to the keyspace can add
one) is skipped and counted by the console's list, its API and ``saga list``, instead of
making the whole list answer 400 for everyone."""

from __future__ import annotations

from typing import Any

import pytest

from saga.console.tokens import Role
from saga.state.keys import Keys
from saga.state.listing import ListQuery, list_page
from saga.state.machine import StateMachine
from saga.state.model import SagaState
from tests.cli.inspect_support import start
from tests.console.support import RunningConsole, check_schema, cli_json, run_cli

pytestmark = pytest.mark.anyio

BAD = ["bad id!", "x" * 300, "{p0}:saga"]
"""Members no valid record id can be: a space and a bang, too long, a hash tag."""


async def plant(redis: Any, keys: Keys) -> None:
    """The malformed members in the created and pending indexes, scored around and
    between the sagas there (newest, in the middle, oldest)."""
    found = [s for _, s in await redis.zrange(keys.created_index(0), 0, -1, withscores=True)]
    middle = (found[0] + found[-1]) / 2
    for score, member in zip((9e12, middle, 1), BAD, strict=True):
        await redis.zadd(keys.created_index(0), {member: score})
        await redis.zadd(keys.state_index(0, SagaState.PENDING), {member: score})


async def test_the_listing_skips_and_counts_malformed_ids(
    sm: StateMachine, redis: Any, keys: Keys
) -> None:
    """list_page returns the valid sagas and counts each malformed member once, across
    pages too (a cursor never lands on one)."""
    await start(sm, "ok-1")
    await start(sm, "ok-2")
    await plant(redis, keys)
    page = await list_page(redis, keys, ListQuery(limit=50))
    assert sorted(r.record_id for r in page.rows) == ["ok-1", "ok-2"]
    assert page.skipped == len(BAD)
    first = await list_page(redis, keys, ListQuery(limit=1))
    assert len(first.rows) == 1 and first.next is not None
    rest = await list_page(redis, keys, ListQuery(limit=50, after=first.next))
    assert [r.record_id for r in first.rows + rest.rows] == [r.record_id for r in page.rows]


async def test_console_page_api_and_cli_list_answer_with_a_count(
    console: RunningConsole,
    tokens: dict[Role, str],
    sm: StateMachine,
    redis: Any,
    keys: Keys,
    env: dict[str, str],
) -> None:
    """/sagas and GET /api/v1/sagas answer 200 with the valid sagas and "3 entries
    skipped: malformed id"; `saga list` prints the same on stderr and `skipped` in --json."""
    await start(sm, "ok-1")
    await plant(redis, keys)
    async with console.client(tokens[Role.VIEWER]) as http:
        for query in ("", "?state=pending"):
            api = await http.get(f"/api/v1/sagas{query}")
            assert api.status_code == 200, api.text
            check_schema("ListDocument", api.json())
            assert [s["record_id"] for s in api.json()["sagas"]] == ["ok-1"]
            assert api.json()["skipped"] == len(BAD)
            page = await http.get(f"/sagas{query}")
            assert page.status_code == 200, page.text
            assert "ok-1" in page.text and "3 entries skipped: malformed id" in page.text
    listed = await cli_json(env, "list")
    assert [s["record_id"] for s in listed["sagas"]] == ["ok-1"] and listed["skipped"] == 3
    code, out, err = await run_cli(env, "list")
    assert code == 0 and "ok-1" in out
    assert err == "saga: 3 entries skipped: malformed id\n"
