"""Branches and a join with a real ``saga worker module:app`` process and a real server:
the claims type forks after intake into fraud and coverage, which run at the same time
(each with its own lease and token), and decide joins them once, taking both outputs.
A branch that fails for good fails the saga; its sibling's late commit is fenced, or,
when the sibling committed first, it is compensated."""

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
from tests.app.branch_apps import Claim, claims
from tests.cli.inspect_support import cli, cli_json
from tests.executor.conftest import SpawnWorker
from tests.executor.support import saga_and_history, states, wait_until

pytestmark = pytest.mark.anyio
APP = "tests.app.branch_apps:claims"
REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "sagas.md"


async def _all(redis: Any, keys: Keys, rids: list[str], want: str, within: float = 60) -> None:
    async def reached() -> bool:
        return await states(redis, keys, rids) == [want] * len(rids)

    await wait_until(reached, within=within, what=f"{rids} to be {want}", every=0.05)


async def test_branches_run_in_parallel_and_the_join_fires_once(
    spawn: SpawnWorker, settings: Settings, redis: Any, redis_url: str, tmp_path: Path
) -> None:
    """Both branches of each saga are in flight at once (saga show lists both lanes, saga
    list --step finds it at either);
    decide commits once per saga, with the fraud score and the coverage it was given;
    every step commits once; the timeline names each row's parents and marks the
    parallel ones."""
    gate = tmp_path / "gate"
    worker = spawn(APP, BRANCH_GATE=str(gate))
    await worker.wait_ready(within=120)
    rids = [f"c{i}" for i in range(6)]
    async with claims.client(settings) as sagas:
        k = sagas.keys
        for i, rid in enumerate(rids):
            await sagas.start(rid, "u1", input=Claim(amount=300 + 400 * i))

        async def both_running() -> bool:
            for rid in rids:
                saga, _ = await saga_and_history(redis, k, rid)
                if sorted(x.state for x in saga.lanes) != ["running", "running"]:
                    return False
            return True

        await wait_until(both_running, within=30, what="every saga's two lanes running",
                         every=0.05)  # fmt: skip
        live = cli(k, redis_url, "show", rids[-1], "--type", "claims").stdout
        assert "lanes" in live and "fraud running" in live and "coverage running" in live
        listed = cli_json(k, redis_url, "list", "--step", "coverage", "--type", "claims")
        assert rids[-1] in [r["record_id"] for r in listed["sagas"]]  # the second lane too
        gate.touch()  # the branches go on
        await _all(redis, k, rids, "completed")
        shown = cli(k, redis_url, "show", rids[0], "--type", "claims").stdout
        for label in ("|| fraud <- intake", "|| coverage <- intake", "decide <- fraud, coverage"):
            assert label in shown, shown
        overlapped = 0
        for i, rid in enumerate(rids):
            saga, events = await saga_and_history(redis, k, rid)
            commits = sorted(e.step for e in events if e.event == EventType.COMMITTED)
            assert commits == ["coverage", "decide", "fraud", "intake", "notify"], (rid, commits)
            amount = 300 + 400 * i
            pay = 0 if amount >= 1000 else min(amount, 500)
            assert msgspec.json.decode(saga.outputs["notify"]) == {"pay": pay}
            spans = {e.step: (e.at_ms - e.duration_ms, e.at_ms) for e in events
                     if e.event == EventType.COMMITTED}  # fmt: skip
            (a0, a1), (b0, b1) = spans["fraud"], spans["coverage"]
            overlapped += a0 < b1 and b0 < a1
            intake = next(e for e in events
                          if e.step == "intake" and e.event == EventType.COMMITTED)  # fmt: skip
            assert set(intake.next_step.split(",")) == {"fraud", "coverage"}
        assert overlapped == len(rids)  # each saga ran its two branches at the same time


async def test_a_failed_branch_fails_the_saga_and_fences_its_sibling(
    spawn: SpawnWorker, settings: Settings, redis: Any
) -> None:
    """fraud fails for good while coverage still runs: the saga is failed at fraud, and
    coverage's late commit is refused (a 'fenced' event, no commit, no join); a retry
    re-runs it from intake, in a new epoch."""
    worker = spawn(APP, FRAUD_FAILS="dead", COVERAGE_DELAY="1.5")
    await worker.wait_ready(within=120)
    async with claims.client(settings) as sagas:
        k = sagas.keys
        await sagas.start("f1", "u1", input=Claim(amount=10))
        await _all(redis, k, ["f1"], "failed")

        async def fenced() -> bool:
            _, events = await saga_and_history(redis, k, "f1")
            return any(e.event == EventType.FENCED and e.step == "coverage" for e in events)

        await wait_until(fenced, within=30, what="coverage's late commit fenced", every=0.05)
        saga, events = await saga_and_history(redis, k, "f1")
        assert saga.step == "fraud" and saga.state == "failed"
        assert [e.step for e in events if e.event == EventType.COMMITTED] == ["intake"]
        again = await sagas.retry("f1")  # a branch re-runs from the step it branches from
        assert (again.step, again.epoch) == ("intake", saga.epoch + 1)


async def test_a_failed_branch_compensates_the_committed_sibling(
    spawn: SpawnWorker, settings: Settings, redis: Any
) -> None:
    """coverage commits first, then fraud fails for good: coverage is undone and the saga
    ends compensated; decide never runs."""
    worker = spawn(APP, FRAUD_FAILS="dead", FRAUD_DELAY="0.8")
    await worker.wait_ready(within=120)
    async with claims.client(settings) as sagas:
        k = sagas.keys
        await sagas.start("g1", "u1", input=Claim(amount=10))
        await _all(redis, k, ["g1"], "compensated")
        _, events = await saga_and_history(redis, k, "g1")
        commits = [e.step for e in events if e.event == EventType.COMMITTED]
        assert commits == ["intake", "coverage", "undo:coverage"], commits


async def test_the_docs_example_runs_as_written(
    spawn: SpawnWorker, settings: Settings, redis: Any, tmp_path: Path
) -> None:
    """docs/sagas.md's claims.py, saved as written, runs under ``saga worker claims:app``:
    the join decides from both branches."""
    code = re.search(r"```python\n(# claims\.py\n.*?)```", DOC.read_text(), re.S)
    assert code, "docs/sagas.md lost its claims.py example"
    (tmp_path / "claims.py").write_text(code.group(1))
    worker = spawn("claims:app", PYTHONPATH=f"{REPO}{os.pathsep}{tmp_path}")
    await worker.wait_ready(within=120)
    sys.path.insert(0, str(tmp_path))
    try:
        app = importlib.import_module("claims").app
    finally:
        sys.path.remove(str(tmp_path))
    assert app.build().names == ("intake", "fraud", "coverage", "decide")
    async with app.client(settings) as sagas:
        await sagas.start("d-1", "u1", input={"amount": 300})
        await sagas.start("d-2", "u1", input={"amount": 3000})
        await _all(redis, sagas.keys, ["d-1", "d-2"], "completed")
        outs = [(await sagas.get(r)).outputs["decide"] for r in ("d-1", "d-2")]
    assert [msgspec.json.decode(o) for o in outs] == [{"pay": 300}, {"pay": 0}]
