"""Per-item compensation of a map, with a real ``saga worker module:app`` process and a
real server: ``@app.map(compensate=)`` undoes each item that committed, once, latest
first, under the key the item ran with; an item that failed is not undone; ``saga show``
draws an undo row per item, and still sums up the map that was undone."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from saga.config.settings import Settings
from saga.state.model import EventType
from tests.app.map_apps import Doc, itemundo
from tests.app.test_map import _all
from tests.cli.inspect_support import cli
from tests.executor.conftest import SpawnWorker
from tests.executor.support import saga_and_history, wait_until

pytestmark = pytest.mark.anyio
ITEMUNDO = "tests.app.map_apps:itemundo"


async def _latest_first(redis: Any, key: str, items: list[int]) -> list[int]:
    """The items in the order the plan undoes them: latest commit ('mc') first."""
    mc = await redis.hmget(key, [f"mc:parse:{i}" for i in items])
    return [i for _, i in sorted(zip([int(v) for v in mc], items, strict=True), reverse=True)]


async def test_each_committed_item_is_undone_once_latest_first(
    spawn: SpawnWorker, settings: Settings, redis: Any, redis_url: str, tmp_path: Path
) -> None:
    """merge fails for good after the map fanned in: parse's three items are undone, each
    once, latest commit first, each with its chunk, its output and its own key
    (<record>:parse:<i>:e1), then split's undo; show has a row per item's undo."""
    log = tmp_path / "undo.log"
    worker = spawn(ITEMUNDO, MERGE_FAILS="1", UNDO_LOG=str(log))
    await worker.wait_ready(within=120)
    async with itemundo.client(settings) as sagas:
        k = sagas.keys
        await sagas.start("iu1", "u1", input=Doc(pages=6))
        await _all(redis, k, ["iu1"], "compensated")
        order = await _latest_first(redis, k.saga("iu1"), [0, 1, 2])
        _, events = await saga_and_history(redis, k, "iu1")
        undos = [(e.step, e.item) for e in events if e.event == EventType.COMMITTED
                 and e.step.startswith("undo:")]  # fmt: skip
        assert undos == [*(("undo:parse", i) for i in order), ("undo:split", -1)], undos
        shown = cli(k, redis_url, "show", "iu1", "--type", "itemundo").stdout
    pages = {0: [0, 1], 1: [2, 3], 2: [4, 5]}
    want = [f"iu1:parse:{i}:e1 {2 * i} {pages[i]}" for i in order] + ["iu1:split:e1 3"]
    assert log.read_text().splitlines() == want
    for i in range(3):
        assert shown.count(f"undo:parse[{i}]") == 1, shown
    # the map that was undone is still summed up, its last run's items all done
    assert "parse: 3 items, 3 done, 0 running, 0 waiting, 0 failed, 0 pending" in shown, shown


async def test_a_failed_item_is_not_undone(
    spawn: SpawnWorker, settings: Settings, redis: Any, tmp_path: Path
) -> None:
    """Chunk 4 (item 2) fails for good: the saga compensates; the items that committed
    before are undone, each once, latest first; item 2, and any item that never ran, is
    not; split's undo runs last."""
    log = tmp_path / "undo.log"
    worker = spawn(ITEMUNDO, PARSE_FAILS="4", UNDO_LOG=str(log))
    await worker.wait_ready(within=120)
    async with itemundo.client(settings) as sagas:
        k = sagas.keys
        await sagas.start("iu2", "u1", input=Doc(pages=10))  # items 0..4, 2 at a time
        await _all(redis, k, ["iu2"], "compensated")
        _, events = await saga_and_history(redis, k, "iu2")
        done = sorted(e.item for e in events if e.event == EventType.COMMITTED
                      and e.step == "parse")  # fmt: skip
        order = await _latest_first(redis, k.saga("iu2"), done)
        failed = await redis.hget(k.saga("iu2"), "mi:parse:2")
    assert done and 2 not in done and failed.endswith(b":f")
    lines = log.read_text().splitlines()
    assert [int(line.split()[0].split(":")[2]) for line in lines[:-1]] == order
    assert lines[-1] == "iu2:split:e1 5"


async def test_a_rerun_maps_items_are_undone_again(
    spawn: SpawnWorker, settings: Settings, redis: Any, tmp_path: Path
) -> None:
    """A compensated saga re-run from its first step runs its map again in a new epoch;
    when it compensates again, that run's items are undone too (an earlier run's undo
    marks are not taken for this run's), each once, under the new run's keys."""
    log = tmp_path / "undo.log"
    worker = spawn(ITEMUNDO, MERGE_FAILS="1", UNDO_LOG=str(log))
    await worker.wait_ready(within=120)
    async with itemundo.client(settings) as sagas:
        k = sagas.keys
        await sagas.start("iu3", "u1", input=Doc(pages=4))
        await _all(redis, k, ["iu3"], "compensated")
        again = await sagas.retry("iu3", step="split")

        async def compensated_again() -> bool:
            got = await sagas.get("iu3")
            return got.state == "compensated" and got.epoch > again.epoch

        await wait_until(compensated_again, within=60, what="iu3 compensated again")
    keys = sorted(line.split()[0] for line in log.read_text().splitlines())
    runs = [f"iu3:{s}:e{e}" for e in (1, again.epoch) for s in ("parse:0", "parse:1", "split")]
    assert keys == sorted(runs)
