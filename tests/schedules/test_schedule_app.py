"""``@app.schedule``: declared on the App, built into its Pipeline with the input made
and checked, refused in one sentence when wrong, and registered by the controller
(definitions replaced, pauses and next ticks kept)."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

import saga
from saga.api.pipeline import AppError
from saga.api.schedules import next_fire
from saga.controller.firing import register
from saga.state import schedules as store
from saga.state.keys import Keys
from tests.schedules.apps import Panel, labs

pytestmark = pytest.mark.anyio
T0 = 1_767_405_600_000


def test_the_apps_schedules_are_in_its_pipeline() -> None:
    """Names from the functions (``_`` as ``-``) or given; inputs as JSON; users."""
    specs = {s.name: s for s in labs.build().schedules}
    assert set(specs) == {"nightly-rerun", "quarter"}
    assert msgspec.json.decode(specs["nightly-rerun"].input) == {"panel": "cbc"}
    assert (specs["nightly-rerun"].user_id, specs["quarter"].user_id) == ("lab-ops", "scheduler")
    assert specs["quarter"].input == b""


def test_mistakes_are_one_sentence() -> None:
    """A bad cron or user at the decorator, a name twice, an input of the wrong type."""
    app = saga.App("wrong")

    @app.step()
    async def only(ctx: saga.StepContext, p: Panel) -> Panel:
        return p

    with pytest.raises(AppError, match="is not five fields"):
        app.schedule(cron="every night")
    with pytest.raises(AppError, match="schedule user"):
        app.schedule(cron="@daily", user="a b")

    @app.schedule(cron="@daily", name="twice")
    def one() -> None: ...

    with pytest.raises(AppError, match="two schedules named 'twice'"):
        app.schedule(cron="@daily", name="twice")(one)

    @app.schedule(cron="@daily")
    def wrong_input() -> Any:
        return {"panel": "cbc"}

    with pytest.raises(AppError, match="returns dict, not the input of step 'only'"):
        app.build()


async def test_registering_keeps_pauses_and_ticks(redis: Any, keys: Keys) -> None:
    """The controller registers the App's schedules at every start: new ones get their
    next tick, a paused one stays paused, an unchanged cron keeps its next tick."""
    specs = labs.build().schedules
    await register(redis, keys, "labs", specs, T0)
    rows = {r.name: r for r in await store.listing(redis, keys)}
    assert rows["nightly-rerun"].next_ms == next_fire("0 2 * * *", T0)
    assert rows["quarter"].saga_type == "labs"
    await store.pause(redis, keys, "quarter")
    await register(redis, keys, "labs", specs, T0 + 3_600_000)
    rows = {r.name: r for r in await store.listing(redis, keys)}
    assert rows["quarter"].paused
    assert rows["nightly-rerun"].next_ms == next_fire("0 2 * * *", T0)
