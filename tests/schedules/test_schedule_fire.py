"""The fire pass against a real server: a due tick starts one saga under its record id,
a doubled or redone fire starts none more, missed ticks fire once, paused schedules and
unregistered types start nothing; the cron arithmetic (croniter) in UTC."""

from __future__ import annotations

from typing import Any

import pytest

from saga.api.schedules import check_cron, next_fire
from saga.config.settings import Settings
from saga.controller.firing import Firing
from saga.state import schedules as store
from saga.state.keys import Keys
from saga.state.reads import get_saga

pytestmark = pytest.mark.anyio
T0 = 1_767_405_600_000  # 2026-01-03 02:00:00 UTC
HOUR = 3_600_000


def test_next_fire_is_the_next_tick_after_in_utc() -> None:
    """Strictly after: a tick is never its own next; aliases work; bad crons are refused
    in one sentence."""
    assert next_fire("0 2 * * *", T0) == T0 + 24 * HOUR
    assert next_fire("0 2 * * *", T0 - 1) == T0
    assert next_fire("*/15 * * * *", T0 + 1) == T0 + 15 * 60_000
    assert next_fire("@hourly", T0) == T0 + HOUR
    assert check_cron(" 0  2 * * * ") == "0 2 * * *"
    for bad in ("", "61 * * * *", "* * *", "every day", "0 2 * * * * *"):
        with pytest.raises(ValueError, match="is not five fields"):
            check_cron(bad)


async def add(redis: Any, keys: Keys, name: str, tick: int, **fields: str) -> None:
    d = store.ScheduleDefinition(cron=fields.get("cron", "0 * * * *"),
                                 saga_type=fields.get("saga_type", "documents"),
                                 user_id="lab", input=fields.get("input", ""))  # fmt: skip
    await store.add(redis, keys, name, d, tick)


async def test_a_due_tick_starts_its_saga_once(
    redis: Any, keys: Keys, registered: Keys, firing: Firing
) -> None:
    """The tick's saga starts under <name>.<tick>Z with the schedule's user and input; the
    schedule moves to its next tick after now; a second pass starts nothing."""
    await add(redis, keys, "hourly", T0, input='{"document": "lab.pdf"}')
    assert await firing.once(T0 + 10) == 1
    saga = await get_saga(redis, registered, "hourly.20260103T020000Z")
    assert (saga.user_id, saga.step) == ("lab", "router")
    [row] = await store.listing(redis, keys)
    assert (row.next_ms, row.last_record_id) == (T0 + HOUR, "hourly.20260103T020000Z")
    assert await firing.once(T0 + 20) == 0


async def test_two_controllers_firing_one_tick_start_one_saga(
    redis: Any, keys: Keys, registered: Keys
) -> None:
    """Two fire passes that both saw the tick due (two controllers) start one saga, and the
    schedule moves once."""
    await add(redis, keys, "hourly", T0)
    a, b = Firing(redis, keys, Settings()), Firing(redis, keys, Settings())
    assert [await a.fire("hourly", T0, T0 + 5), await b.fire("hourly", T0, T0 + 5)] == [1, 0]
    assert (await store.listing(redis, keys))[0].next_ms == T0 + HOUR
    assert await redis.xlen(registered.ready(0, "router")) == 1


async def test_a_fire_killed_after_the_start_is_redone_without_a_second_saga(
    redis: Any, keys: Keys, registered: Keys, firing: Firing
) -> None:
    """The saga started but the schedule was not moved (the process died between the two
    scripts): the next pass finds the saga (start is idempotent) and moves it on."""
    from saga.api.client import SagaClient
    from tests.executor import pipelines

    await add(redis, keys, "hourly", T0)
    client = SagaClient(redis, keys, pipelines.pipeline(), Settings())
    await client.start(store.record_id_of("hourly", T0), "lab")  # ... and then kill -9
    assert await firing.once(T0 + 5) == 0
    assert (await store.listing(redis, keys))[0].next_ms == T0 + HOUR
    assert await redis.xlen(registered.ready(0, "router")) == 1


async def test_missed_ticks_fire_once_and_the_next_is_after_now(
    redis: Any, keys: Keys, registered: Keys, firing: Firing
) -> None:
    """Five hours without a controller: the oldest due tick fires once, the others are
    skipped, and the next tick is the next after now."""
    await add(redis, keys, "hourly", T0)
    assert await firing.once(T0 + 5 * HOUR + 60_000) == 1
    assert (await store.listing(redis, keys))[0].next_ms == T0 + 6 * HOUR
    assert await redis.xlen(registered.ready(0, "router")) == 1


async def test_paused_and_unregistered_schedules_start_nothing(
    redis: Any, keys: Keys, registered: Keys, firing: Firing
) -> None:
    """A paused schedule is not due; one of a type nobody registered skips its tick (and
    says so in the log) instead of firing it every pass."""
    await add(redis, keys, "paused", T0)
    await store.pause(redis, keys, "paused")
    await add(redis, keys, "orphan", T0, saga_type="nope")
    assert await firing.once(T0 + 5) == 0
    rows = {r.name: r for r in await store.listing(redis, keys)}
    assert rows["paused"].paused and rows["orphan"].next_ms == T0 + HOUR
    assert rows["orphan"].last_record_id == ""
    assert await redis.xlen(registered.ready(0, "router")) == 0
