"""The schedule scripts against a real server: add (new, same, another definition,
replace), pause, resume, rm, and the fenced advance; the record id of a tick."""

from __future__ import annotations

from typing import Any

import pytest

from saga.state import schedules as store
from saga.state.errors import InvalidIdError, SagaNotFoundError
from saga.state.keys import Keys

pytestmark = pytest.mark.anyio
NIGHTLY = store.ScheduleDefinition(cron="0 2 * * *", saga_type="documents", user_id="lab")
T0 = 1_767_405_600_000  # 2026-01-03 02:00:00 UTC


def test_a_ticks_record_id_is_the_name_and_the_tick_in_utc() -> None:
    """Each tick has its own record id, the same for every fire of that tick."""
    assert store.record_id_of("nightly", T0) == "nightly.20260103T020000Z"
    assert store.record_id_of("nightly", T0 + 60_000) == "nightly.20260103T020100Z"
    with pytest.raises(InvalidIdError, match="limit is 64"):
        store.validate_name("n" * 65)
    with pytest.raises(InvalidIdError, match="contains ' '"):
        store.validate_name("a b")


async def test_add_is_idempotent_and_refuses_another_definition(redis: Any, keys: Keys) -> None:
    """The same definition again changes nothing; another under the name is refused
    unless replaced, and a replace with the same cron keeps the next tick."""
    assert await store.add(redis, keys, "nightly", NIGHTLY, T0) == (True, T0)
    assert await store.add(redis, keys, "nightly", NIGHTLY, T0 + 5) == (False, T0)
    other = store.ScheduleDefinition(cron="0 3 * * *", saga_type="documents", user_id="lab")
    with pytest.raises(store.ScheduleExistsError, match="exists already"):
        await store.add(redis, keys, "nightly", other, T0)
    same_cron = store.ScheduleDefinition(cron="0 2 * * *", saga_type="documents", user_id="x")
    assert await store.add(redis, keys, "nightly", same_cron, T0 + 9, replace=True) == (True, T0)
    assert await store.add(redis, keys, "nightly", other, T0 + 9, replace=True) == (True, T0 + 9)
    [row] = await store.listing(redis, keys)
    assert (row.name, row.cron, row.user_id, row.next_ms, row.paused) == (
        "nightly", "0 3 * * *", "lab", T0 + 9, False)  # fmt: skip


async def test_pause_resume_and_remove(redis: Any, keys: Keys) -> None:
    """Pause drops the next tick (a replace keeps it paused), resume sets the one given,
    rm deletes; an unknown name is SagaNotFoundError."""
    await store.add(redis, keys, "nightly", NIGHTLY, T0)
    assert await store.pause(redis, keys, "nightly") is True
    assert await store.pause(redis, keys, "nightly") is False
    assert await store.due(redis, keys, T0 + 10**9) == []
    other = store.ScheduleDefinition(cron="5 2 * * *", saga_type="documents", user_id="lab")
    assert await store.add(redis, keys, "nightly", other, T0, replace=True) == (True, -1)
    assert (await store.listing(redis, keys))[0].paused
    assert await store.resume(redis, keys, "nightly", T0 + 100) == (True, T0 + 100)
    assert await store.resume(redis, keys, "nightly", T0 + 200) == (False, T0 + 100)
    assert await store.due(redis, keys, T0 + 100) == [("nightly", T0 + 100)]
    await store.remove(redis, keys, "nightly")
    assert await store.listing(redis, keys) == []
    for call in (store.pause(redis, keys, "nightly"), store.remove(redis, keys, "nightly"),
                 store.resume(redis, keys, "nightly", T0)):  # fmt: skip
        with pytest.raises(SagaNotFoundError, match="no schedule named 'nightly'"):
            await call


async def test_advance_is_fenced_by_the_tick(redis: Any, keys: Keys) -> None:
    """Only the fire of the stored tick moves the schedule; a second fire of that tick, or
    one of a paused schedule, changes nothing."""
    await store.add(redis, keys, "nightly", NIGHTLY, T0)
    rid = store.record_id_of("nightly", T0)
    assert await store.advance(redis, keys, "nightly", T0, T0 + 86_400_000, rid) is True
    assert await store.advance(redis, keys, "nightly", T0, T0 + 5, rid) is False
    [row] = await store.listing(redis, keys)
    assert (row.next_ms, row.last_tick_ms, row.last_record_id) == (T0 + 86_400_000, T0, rid)
    await store.pause(redis, keys, "nightly")
    assert await store.advance(redis, keys, "nightly", T0 + 86_400_000, T0 + 9, rid) is False
    assert (await store.listing(redis, keys))[0].paused
