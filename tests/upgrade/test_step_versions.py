"""Step versions (``@app.step(version=2)``): each commit records the version of the code
that ran, ``saga show`` and ``saga list --step-version`` show it, and the next step reads
it as ``ctx.input_version`` (the patching branch). Real workers, a real server."""

from __future__ import annotations

from typing import Any

import pytest

from saga.config.settings import Settings
from saga.state.keys import Keys
from saga.state.model import EventType
from tests.cli.inspect_support import cli, cli_json
from tests.executor.conftest import SpawnWorker
from tests.executor.support import saga_and_history
from tests.upgrade.release_sagas import finished_by, taken_by

pytestmark = pytest.mark.anyio


async def test_a_step_version_is_recorded_shown_listed_and_read_by_the_next_step(
    spawn: SpawnWorker, settings: Settings, redis: Any, keys: Keys, redis_url: str
) -> None:
    """take of v2 (version 1) commits one saga, take of v3 (version 2) another: check of
    v3 sees input version 1 and 2; history, show and list say which ran where."""
    k = await taken_by(spawn, settings, redis, "v2", "old-take")
    rids = ["old-take", "new-take"]
    trails = await finished_by(spawn, settings, redis, k, "v3", rids)
    versions = {}
    for rid in rids:
        _, events = await saga_and_history(redis, k, rid)
        versions[rid] = {e.step: e.step_version for e in events if e.event == EventType.COMMITTED}
    assert trails == {
        "old-take": ["v2/take", "v3/check(input v1)", "v3/ship"],
        "new-take": ["v3/take@2", "v3/check(input v2)", "v3/ship"],
    }
    assert versions == {
        "old-take": {"take": 1, "check": 1, "ship": 1},
        "new-take": {"take": 2, "check": 1, "ship": 1},
    }
    shown = cli(keys, redis_url, "show", "new-take", "--type", "parcels")
    assert shown.returncode == 0, shown.stderr
    assert "take v2" in shown.stdout and "check v" not in shown.stdout
    attempts = cli_json(keys, redis_url, "show", "new-take", "--type", "parcels")["attempts"]
    assert [(a["step"], a["step_version"]) for a in attempts] == [
        ("take", 2),
        ("check", 1),
        ("ship", 1),
    ]

    def listed(spec: str) -> list[str]:
        doc = cli_json(keys, redis_url, "list", "--type", "parcels", "--step-version", spec)
        return [r["record_id"] for r in doc["sagas"]]

    assert listed("take:2") == ["new-take"]
    assert listed("take:1") == ["old-take"]
    assert sorted(listed("ship:1")) == sorted(rids)
    assert listed("ship:2") == []


async def test_a_malformed_step_version_is_one_sentence(keys: Keys, redis_url: str) -> None:
    """--step-version without a version, or with a bad one: exit 2, one sentence."""
    for bad in ("take", "take:0", "take:x", "Bad Step:2"):
        res = cli(keys, redis_url, "list", "--step-version", bad)
        assert res.returncode == 2, (bad, res.stderr)
        assert res.stderr.startswith("saga: --step-version must be STEP:V"), res.stderr
        assert "Traceback" not in res.stderr
