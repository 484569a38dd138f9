"""Maps under the per-user cap and priorities, with a real worker and a real server: a
capped user's sagas run their maps (the items hold no slot: the saga is running at the
map, the map's concurrency bounds its items), no slot is left taken, and an urgent saga
of a type with a map is claimed early at its first step and runs its map like any other."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from saga.config.settings import Settings
from saga.state.model import EventType
from tests.app.map_apps import Doc, pages
from tests.app.test_map import _all
from tests.executor.conftest import SpawnWorker
from tests.executor.support import saga_and_history, wait_until

pytestmark = pytest.mark.anyio
PAGES = "tests.app.map_apps:pages"


async def test_a_map_runs_under_the_per_user_cap(
    spawn: SpawnWorker, settings: Settings, redis: Any, tmp_path: Path
) -> None:
    """SAGA_USER_MAX_INFLIGHT=1: one user's six sagas (and another user's two) all
    complete, each item once. A map's items hold no slot of the cap (the map's own
    concurrency bounds them): while the items are held, all six sagas of the user run
    items at once. No slot or deferred entry is left when they are done."""
    gate = tmp_path / "gate"
    worker = spawn(PAGES, MAP_GATE=str(gate), SAGA_USER_MAX_INFLIGHT="1",
                   SAGA_PARSE_CONCURRENCY="32")  # fmt: skip
    await worker.wait_ready(within=120)
    rids = [f"c{i}" for i in range(6)]
    async with pages.client(settings) as sagas:
        k = sagas.keys
        for rid in rids:
            await sagas.start(rid, "u1", input=Doc(pages=6))
        for rid in ("o1", "o2"):
            await sagas.start(rid, "u2", input=Doc(pages=4))

        async def all_running_items() -> bool:
            for rid in rids:
                fields = await redis.hgetall(k.saga(rid))
                if not any(f.startswith(b"mi:parse:") and v.endswith(b":r")
                           for f, v in fields.items()):  # fmt: skip
                    return False
            return True

        await wait_until(all_running_items, within=60, what="u1's six maps running items")
        gate.touch()
        await _all(redis, k, [*rids, "o1", "o2"], "completed", within=90)
        for rid in [*rids, "o1", "o2"]:
            _, events = await saga_and_history(redis, k, rid)
            items = sorted(e.item for e in events
                           if e.event == EventType.COMMITTED and e.step == "parse")  # fmt: skip
            assert items == list(range(3 if rid.startswith("c") else 2)), (rid, items)
        for step in ("split", "parse", "merge"):
            assert await redis.hlen(k.inflight(0, step)) == 0, step
            assert await redis.exists(k.deferred(0, step)) == 0, step


async def test_an_urgent_saga_with_a_map_goes_first_and_runs_its_map(
    spawn: SpawnWorker, settings: Settings, redis: Any
) -> None:
    """Forty priority-0 sagas, then one at priority 5, started before any worker runs: the
    urgent one's split is claimed before most of the others', and its map runs each item
    once; every saga completes."""
    rids = [f"b{i}" for i in range(40)]
    async with pages.client(settings) as sagas:
        k = sagas.keys
        for rid in rids:
            await sagas.start(rid, "u1", input=Doc(pages=4))
        await sagas.start("urgent", "u2", input=Doc(pages=6), priority=5)
        worker = spawn(PAGES, SAGA_READ_BATCH="5", SAGA_SPLIT_CONCURRENCY="1")
        await worker.wait_ready(within=120)
        await _all(redis, k, [*rids, "urgent"], "completed", within=120)
        firsts = {}
        for rid in [*rids, "urgent"]:
            _, events = await saga_and_history(redis, k, rid)
            firsts[rid] = min(e.at_ms for e in events
                              if e.event == EventType.COMMITTED and e.step == "split")  # fmt: skip
            if rid == "urgent":
                items = sorted(e.item for e in events
                               if e.event == EventType.COMMITTED and e.step == "parse")  # fmt: skip
                assert items == [0, 1, 2]
        rank = sorted(firsts.values()).index(firsts["urgent"])
        assert rank < 10, rank  # 40 started before it
