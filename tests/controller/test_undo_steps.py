"""Undo steps at zero workers: a compensation's retry (``undo:<step>``) waits in its own
delayed set, which no KEDA trigger of the step sees; the controller promotes it into the
undo's ready stream (its lag wakes the step, chart: a second trigger) and exports its
gauges, and a worker started then finishes the compensation. Real ``saga worker`` and
``saga controller`` processes; the controller has the test pipeline, so it learns the
``trips`` type, and which of its steps have compensations, from the registry of types."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import pytest

from saga.config.settings import Settings, StepSettings
from saga.state.keys import Keys
from saga.state.model import EventType
from tests.app import undo_apps
from tests.app.undo_apps import Trip
from tests.controller.support import Procs, lag, metric, pending_count
from tests.controller.test_scale_to_zero import scrape
from tests.executor.support import saga_and_history, states, wait_until

pytestmark = pytest.mark.anyio

APP = "tests.app.undo_apps:trips"


async def test_undo_retry_at_zero_workers_is_promoted_then_compensated(
    redis: Any, keys: Keys, base_env: dict[str, str], procs: Procs, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    ledger = tmp_path / "ledger"
    ledger.mkdir()
    monkeypatch.setenv("UNDO_LEDGER", str(ledger))
    # The hotel's undo fails once; its retry is due 2^1 * 3 = 6 s later: after the worker left.
    env = {**base_env, "UNDO_LEDGER": str(ledger), "SAGA_HOTEL_BACKOFF": "3"}
    worker = procs.worker(env, APP)
    await worker.wait_ready(within=120)
    settings = Settings(redis_url=base_env["REDIS_URL"], key_prefix=keys.prefix, partitions=1)
    async with undo_apps.trips.client(settings) as trips:
        await trips.start("t-1", "u1", input=Trip(who="a", fail_at="pay", undo_fails=1))
        k = trips.keys
    undo = "undo:hotel"

    async def undo_waits() -> bool:
        return bool(await redis.zcard(k.delayed(0, undo)) == 1)

    await wait_until(undo_waits, within=60, what="the hotel's undo to wait", on_timeout=procs.tails)
    worker.signal(signal.SIGTERM)
    assert await worker.wait_exit(within=30) == 0
    assert await states(redis, k, ["t-1"]) == ["compensating"]
    assert (await lag(redis, k, undo), await pending_count(redis, k, undo)) == (0, 0)

    controller = procs.controller(env)  # the test pipeline: trips is found in the registry
    await controller.wait_ready(within=90)

    async def promoted() -> bool:
        return await redis.zcard(k.delayed(0, undo)) == 0 and await lag(redis, k, undo) == 1

    await wait_until(promoted, within=30, what="the controller to promote", on_timeout=procs.tails)

    async def gauges_say_so() -> bool:
        text = await scrape(controller.port)
        return metric(text, "saga_stream_lag", saga_type="trips", step=undo) == 1

    await wait_until(gauges_say_so, within=20, what="the undo's lag in the controller's gauges")
    text = await scrape(controller.port)
    assert metric(text, "saga_controller_promoted_total", saga_type="trips", step=undo) == 1
    assert metric(text, "saga_stream_lag", saga_type="trips", step="undo:flight") == 0
    assert metric(text, "saga_stream_lag", saga_type="trips", step="undo:pay") is None

    procs.worker(env, APP)

    async def compensated() -> bool:
        return await states(redis, k, ["t-1"]) == ["compensated"]

    await wait_until(compensated, within=60, what="compensated", on_timeout=procs.tails)
    _, events = await saga_and_history(redis, k, "t-1")
    commits = [e.step for e in events if e.event == EventType.COMMITTED]
    assert commits[-2:] == ["undo:hotel", "undo:flight"]
    assert [e.step for e in events if e.event == EventType.PROMOTED] == [undo]
    assert sorted(undo_apps.done("trips-cancel-hotel")) == ["t-1:hotel:e1"]

    async def served() -> bool:  # the hotel's worker serves its undo too
        text = await scrape(controller.port)
        return metric(text, "saga_consumers_active", saga_type="trips", step=undo) == 1

    await wait_until(served, within=20, what="the undo's workers in the controller's gauges")
    controller.signal(signal.SIGTERM)
    assert await controller.wait_exit(within=30) == 0


def test_undo_steps_are_leased_like_their_steps() -> None:
    """An undo step is requeued after its step's lease (the undo runs with it); a type
    registered before compensations (no ``undoable``) has none."""
    from saga.controller.types import StepLease, leases_of
    from saga.state.types import TypeInfo

    settings = Settings(steps={"hotel": StepSettings(lease_s=7.0)})
    info = TypeInfo(name="trips", steps=("flight", "hotel", "pay"), undoable=("hotel", "flight"))
    assert leases_of(info, settings)[3:] == [
        StepLease("undo:flight", 60.0),
        StepLease("undo:hotel", 7.0),
    ]
    old = TypeInfo(name="trips", steps=("flight", "hotel", "pay"))
    assert [s.name for s in leases_of(old, settings)] == ["flight", "hotel", "pay"]
