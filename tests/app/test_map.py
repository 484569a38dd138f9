"""Maps (fan-out / fan-in) with a real ``saga worker module:app`` process and a real
server: split returns chunks, parse runs once per chunk (each item its own attempts,
token and history rows, at most ``concurrency`` in flight per saga), and merge takes the
outputs in item order, fanned in once by the last item's commit."""

from __future__ import annotations

import importlib
import os
import re
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest

from saga.config.settings import Settings
from saga.state.keys import Keys
from saga.state.model import EventType
from tests.app.map_apps import Doc, pages, partial, undone
from tests.cli.inspect_support import cli, cli_json
from tests.executor.conftest import SpawnWorker
from tests.executor.support import saga_and_history, states, wait_until

pytestmark = pytest.mark.anyio
PAGES = "tests.app.map_apps:pages"
PARTIAL = "tests.app.map_apps:partial"
UNDONE = "tests.app.map_apps:undone"
REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "sagas.md"


async def _all(redis: Any, keys: Keys, rids: list[str], want: str, within: float = 60) -> None:
    async def reached() -> bool:
        return await states(redis, keys, rids) == [want] * len(rids)

    await wait_until(reached, within=within, what=f"{rids} to be {want}", every=0.05)


def _item_commits(events: list[Any], step: str = "parse") -> list[int]:
    return sorted(e.item for e in events if e.event == EventType.COMMITTED and e.step == step)


async def test_a_map_runs_each_item_once_and_fans_in_in_item_order(
    spawn: SpawnWorker, settings: Settings, redis: Any, redis_url: str, tmp_path: Path
) -> None:
    """Each chunk commits once (its own history row, item index and token); at most 3
    items of a saga are open at once while the gate holds them (saga show and --json list
    them); merge commits once with every page in order; spawned and fanned_in appear
    once each, and the timeline has a row per item."""
    gate = tmp_path / "gate"
    worker = spawn(PAGES, MAP_GATE=str(gate), SAGA_PARSE_CONCURRENCY="16")  # 3 sagas x 3
    await worker.wait_ready(within=120)
    rids = ["m0", "m1", "m2"]
    async with pages.client(settings) as sagas:
        k = sagas.keys
        for i, rid in enumerate(rids):
            await sagas.start(rid, "u1", input=Doc(pages=9 + i * 4))

        async def running(rid: str) -> list[bytes]:
            fields = await redis.hgetall(k.saga(rid))
            items = [(f, v) for f, v in fields.items() if f.startswith(b"mi:parse:")]
            return [f for f, v in items if v.endswith(b":r")]

        async def three_running() -> bool:
            return all([len(await running(rid)) == 3 for rid in rids])

        await wait_until(three_running, within=30, what="3 items running per saga", every=0.05)
        for rid in rids:  # the concurrency bound, with 2 to 4 more chunks to go
            assert (await redis.hget(k.saga(rid), "map:parse")).split()[3] == b"3"
            assert len(await running(rid)) == 3
        shown = cli(k, redis_url, "show", "m2", "--type", "pages").stdout
        assert "parse: 9 items, 0 done, 3 running, 0 waiting, 0 failed, 6 pending" in shown
        assert "#0 running (" in shown and "#3 pending" in shown, shown
        view = cli_json(k, redis_url, "show", "m2", "--type", "pages")["saga"]
        [run] = view["maps"]
        assert (run["step"], run["items"], len(run["rows"])) == ("parse", 9, 9)
        assert [r["state"] for r in run["rows"]][:4] == ["running"] * 3 + ["pending"]
        gate.touch()
        await _all(redis, k, rids, "completed")
        for i, rid in enumerate(rids):
            n_pages = 9 + i * 4
            saga, events = await saga_and_history(redis, k, rid)
            chunks = (n_pages + 1) // 2
            assert _item_commits(events) == list(range(chunks)), rid
            tokens = {e.item: e for e in events if e.event == EventType.COMMITTED and e.item >= 0}
            assert len(tokens) == chunks
            assert [e.event for e in events].count(EventType.SPAWNED) == 1
            assert [e.event for e in events].count(EventType.FANNED_IN) == 1
            merged = [e for e in events if e.event == EventType.COMMITTED and e.step == "merge"]
            assert len(merged) == 1
            assert saga.maps[0].done == chunks and saga.maps[0].running == 0
            report = msgspec.json.decode(saga.outputs["merge"])
            assert report["pages"] == list(range(n_pages)) and report["chunks"] == chunks
        shown = cli(k, redis_url, "show", "m0", "--type", "pages").stdout
        assert "parse[0]" in shown and "parse[4]" in shown, shown  # a row per item


async def test_a_failed_item_fails_the_saga_and_a_retried_item_commits(
    spawn: SpawnWorker, settings: Settings, redis: Any
) -> None:
    """on_failure="fail": chunk 4 fails for good, so the saga is failed at parse and merge
    never runs; chunk 2 failed once and its retry (its own attempt 2) committed. A retry
    of the failed saga re-runs the map from its spawn, in a new epoch."""
    worker = spawn(PAGES, PARSE_FAILS="4", PARSE_FLAKY="2")
    await worker.wait_ready(within=120)
    async with pages.client(settings) as sagas:
        k = sagas.keys
        await sagas.start("f1", "u1", input=Doc(pages=4))  # chunks 0, 2: flaky one commits
        await sagas.start("f2", "u1", input=Doc(pages=8))  # chunk 4 fails for good
        await _all(redis, k, ["f1"], "completed")
        await _all(redis, k, ["f2"], "failed")
        _, events = await saga_and_history(redis, k, "f1")
        retried = [e for e in events if e.event == EventType.RETRY_SCHEDULED]
        assert [(e.step, e.item, e.attempt) for e in retried] == [("parse", 1, 1)]
        assert [(e.item, e.attempt) for e in events if e.event == EventType.COMMITTED
                and e.step == "parse" and e.item == 1] == [(1, 2)]  # fmt: skip
        saga, events = await saga_and_history(redis, k, "f2")
        assert (saga.step, saga.error_class) == ("parse", "PermanentError")
        assert not [e for e in events if e.step == "merge"]
        assert [e.event for e in events].count(EventType.FANNED_IN) == 0
        again = await sagas.retry("f2")  # from the map: its items spawn afresh, new epoch
        assert (again.step, again.epoch) == ("parse", saga.epoch + 1)

        async def failed_again() -> bool:
            got, evs = await saga_and_history(redis, k, "f2")
            return (
                got.state == "failed"
                and got.epoch == again.epoch
                and any(e.event == EventType.SPAWNED and e.epoch == again.epoch for e in evs)
            )

        await wait_until(failed_again, within=60, what="f2 re-spawned and failed again")


async def test_a_list_over_1000_items_is_refused_in_one_sentence(
    spawn: SpawnWorker, settings: Settings, redis: Any
) -> None:
    """split returns 1,001 chunks: the spawn dead-letters the saga at parse with one
    sentence (no item runs); 1,000 is taken."""
    worker = spawn(PAGES)
    await worker.wait_ready(within=120)
    async with pages.client(settings) as sagas:
        k = sagas.keys
        await sagas.start("big", "u1", input=Doc(pages=2002))
        await _all(redis, k, ["big"], "failed")
        saga, events = await saga_and_history(redis, k, "big")
        assert (saga.step, saga.error_class) == ("parse", "InvalidInputError")
        assert saga.error_message == "step split returned 1001 items; map parse takes at most 1000"
        assert not [e for e in events if e.event == EventType.SPAWNED]
        await sagas.start("max", "u1", input=Doc(pages=2000))
        await _all(redis, k, ["max"], "completed", within=120)
        assert (await sagas.get("max")).maps[0].done == 1000


async def test_partial_map_fans_in_with_the_failed_items_marked(
    spawn: SpawnWorker, settings: Settings, redis: Any
) -> None:
    """on_failure="partial": chunks 2 and 6 fail for good; merge still runs once and gets
    MapResults with partial=True, failed=[1, 3] and the other chunks' pages."""
    worker = spawn(PARTIAL, PARSE_FAILS="2,6")
    await worker.wait_ready(within=120)
    async with partial.client(settings) as sagas:
        k = sagas.keys
        await sagas.start("p1", "u1", input=Doc(pages=8))
        await sagas.start("p2", "u1", input=Doc(pages=0))  # no items: fanned in at spawn
        await _all(redis, k, ["p1", "p2"], "completed")
        saga, events = await saga_and_history(redis, k, "p1")
        report = msgspec.json.decode(saga.outputs["merge_partial"])
        assert report == {"pages": [0, 1, 4, 5], "chunks": 4, "partial": True, "failed": [1, 3]}
        assert _item_commits(events) == [0, 2]
        saga, _ = await saga_and_history(redis, k, "p2")
        assert msgspec.json.decode(saga.outputs["merge_partial"]) == {
            "pages": [], "chunks": 0, "partial": False, "failed": []
        }  # fmt: skip


async def test_an_item_failed_for_good_compensates_the_steps_before_the_map(
    spawn: SpawnWorker, settings: Settings, redis: Any, tmp_path: Path
) -> None:
    """on_failure="fail" with a compensation on split: chunk 2 fails for good, the saga
    compensates instead of failing, and split's undo runs once, under split's key, with
    its committed output (the chunks)."""
    log = tmp_path / "undo.log"
    worker = spawn(UNDONE, PARSE_FAILS="2", UNDO_LOG=str(log))
    await worker.wait_ready(within=120)
    async with undone.client(settings) as sagas:
        k = sagas.keys
        await sagas.start("u1", "u1", input=Doc(pages=6))
        await _all(redis, k, ["u1"], "compensated")
        _, events = await saga_and_history(redis, k, "u1")
        assert [e.event for e in events].count(EventType.COMPENSATING) == 1
        assert not [e for e in events if e.step == "merge_undone"]
    assert log.read_text() == "u1:split:e1 3\n"


async def test_the_docs_example_runs_as_written(
    spawn: SpawnWorker, settings: Settings, redis: Any, tmp_path: Path
) -> None:
    """docs/sagas.md's pages.py, taken from the page: chunk 6 fails for good, merge gets
    MapResults marked partial and reports the other pages."""
    code = re.search(r"```python\n(# pages\.py\n.*?)```", DOC.read_text(), re.S)
    assert code, "docs/sagas.md lost its pages.py example"
    (tmp_path / "pages.py").write_text(code.group(1))
    worker = spawn("pages:app", PYTHONPATH=f"{REPO}{os.pathsep}{tmp_path}")
    await worker.wait_ready(within=120)
    sys.path.insert(0, str(tmp_path))
    try:
        app = importlib.import_module("pages").app
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("pages", None)
    async with app.client(settings) as sagas:
        await sagas.start("p-1", "user-7", input={"pages": 10})
        await _all(redis, sagas.keys, ["p-1"], "completed")
        saga = await sagas.get("p-1")
    report = msgspec.json.decode(saga.outputs["merge"])
    assert report == {"pages": [0, 1, 2, 3, 4, 5, 8, 9], "partial": True}
    [run] = saga.maps
    assert (run.items, run.done, run.failed) == (5, 4, 1)
