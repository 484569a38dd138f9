"""``saga schedule`` against a real server: add, list (table and --json in its schema),
pause, resume, rm; bad input is one sentence and exit 2, an unknown name exit 4."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from saga.api.schedules import next_fire
from saga.cli.shapes import schema
from saga.state.keys import Keys
from tests.console.support import run_cli, settings_env

pytestmark = pytest.mark.anyio


@pytest.fixture
def env(redis_url: str, keys: Keys, tmp_path: Path) -> dict[str, str]:
    return settings_env(redis_url, keys, tmp_path / "data")


async def ok(env: dict[str, str], *args: str) -> Any:
    code, out, err = await run_cli(env, "schedule", *args, "--json")
    assert code == 0, err
    return json.loads(out)


async def test_add_list_pause_resume_rm(env: dict[str, str]) -> None:
    """A schedule's whole life through the CLI; each --json answer fits its schema."""
    before = int(time.time() * 1000)
    row = await ok(env, "add", "nightly", "--cron", "0 2 * * *", "--user", "lab",
                   "--input", '{"document": "https://lab/batch.pdf"}')  # fmt: skip
    assert (row["name"], row["cron"], row["saga_type"], row["user_id"]) == (
        "nightly", "0 2 * * *", "documents", "lab")  # fmt: skip
    assert row["next_ms"] in {next_fire("0 2 * * *", before), next_fire("0 2 * * *", before + 5000)}
    listed = await ok(env, "list")
    jsonschema.validate(listed, schema("schedule-list"))
    assert [r["name"] for r in listed["schedules"]] == ["nightly"]
    assert (await ok(env, "pause", "nightly"))["paused"] is True
    code, out, _ = await run_cli(env, "schedule", "list")
    assert code == 0 and "nightly" in out and "paused" in out
    resumed = await ok(env, "resume", "nightly")
    assert resumed["paused"] is False and resumed["next_ms"] > before
    assert await ok(env, "rm", "nightly") == {"name": "nightly", "removed": True}
    assert (await ok(env, "list"))["schedules"] == []


async def test_bad_input_is_one_sentence(env: dict[str, str]) -> None:
    """Bad cron, bad name, input the first step does not take, an unknown type: exit 2; a
    taken name: exit 1; an unknown schedule: exit 4; never a traceback."""
    await ok(env, "add", "taken", "--cron", "@daily")
    cases = [
        (("add", "n1", "--cron", "61 * * * *"), 2, "is not five fields"),
        (("add", "a b", "--cron", "@daily"), 2, "schedule name 'a b' contains ' '"),
        (("add", "n2", "--cron", "@daily", "--input", '{"pages": 1}'), 2, "reads no field"),
        (("add", "n3", "--cron", "@daily", "--type", "nope"), 2, "no saga type 'nope'"),
        (("add", "taken", "--cron", "@hourly"), 1, "exists already"),
        (("pause", "ghost"), 4, "no schedule named 'ghost'"),
        (("rm", "ghost"), 4, "no schedule named 'ghost'"),
    ]
    for args, want, says in cases:
        code, _, err = await run_cli(env, "schedule", *args)
        assert (code, says in err) == (want, True), (args, code, err)
        assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err


async def test_the_console_lists_schedules(env: dict[str, str], redis: Any, keys: Keys) -> None:
    """GET /api/v1/schedules is `saga schedule list --json` for a viewer; the Schedules page
    shows each one (paused ones say so); a producer may not read them."""
    from saga.console.tokens import Role, add_stored_token
    from tests.console.support import check_schema, console_signer, serve

    await ok(env, "add", "nightly", "--cron", "0 2 * * *")
    await ok(env, "add", "hourly", "--cron", "@hourly")
    await ok(env, "pause", "hourly")
    now = int(time.time() * 1000)
    viewer = await add_stored_token(redis, keys, "vic", Role.VIEWER, signer=console_signer(),
                                    now_ms=now)  # fmt: skip
    producer = await add_stored_token(redis, keys, "pat", Role.PRODUCER,
                                      signer=console_signer(), now_ms=now)  # fmt: skip
    console = serve(env)
    try:
        async with console.client(viewer) as http:
            doc = (await http.get("/api/v1/schedules")).json()
            page = await http.get("/schedules")
        async with console.client(producer) as http:
            refused = await http.get("/api/v1/schedules")
    finally:
        console.stop()
    check_schema("ScheduleList", doc)
    assert doc == await ok(env, "list")
    assert page.status_code == 200
    assert 'id="schedule-nightly"' in page.text and "<b>paused</b>" in page.text
    assert refused.status_code == 403
