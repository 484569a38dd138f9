"""saga dlq list|show|replay|purge through the entry point against a real server."""

from __future__ import annotations

from typing import Any

import pytest

from saga.state.keys import Keys
from saga.state.machine import StateMachine
from saga.state.model import FailAction
from saga.state.requests import FailRequest
from tests.cli.inspect_support import cli, cli_json, machine, run_to_dead, start
from tests.state.helpers import claim_next, server_ms, wait_lease_expired

pytestmark = pytest.mark.anyio


async def three_dead(sm: StateMachine) -> None:
    """mr-1 dead at router, mr-2 and mr-3 (user u-2) dead at parser, in that order."""
    for rid, step, user in (("mr-1", "router", "u-1"), ("mr-2", "parser", "u-2"),
                            ("mr-3", "parser", "u-2")):  # fmt: skip
        await wait_lease_expired(sm.client, await server_ms(sm.client))  # distinct ms
        await run_to_dead(sm, rid, step, user)


async def snapshot(redis: Any, keys: Keys) -> list[Any]:
    """The dead-letter streams and each saga's state, epoch and step."""
    out = [await redis.xrange(keys.dead(0, s)) for s in ("router", "parser")]
    for rid in ("mr-1", "mr-2", "mr-3"):
        out.append(await redis.hmget(keys.saga(rid), "state", "epoch", "step"))
    return out


async def test_list_newest_first_table_and_json(redis: Any, keys: Keys, redis_url: str) -> None:
    """Dead letters of every registered step, newest first; --step and --limit narrow them."""
    await three_dead(await machine(redis, keys))
    res = cli(keys, redis_url, "dlq", "list")
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0].split() == ["record", "user", "step", "attempt", "error", "message", "time"]
    assert [line.split()[:5] for line in lines[2:]] == [
        ["mr-3", "u-2", "parser", "1", "ParseError"],
        ["mr-2", "u-2", "parser", "1", "ParseError"],
        ["mr-1", "u-1", "router", "1", "ParseError"],
    ]
    doc = cli_json(keys, redis_url, "dlq", "list", "--step", "parser", "--limit", "1")
    (only,) = doc["dead_letters"]
    assert only["record_id"] == "mr-3" and only["error_message"] == "no table in mr-3"
    assert set(only) == {
        "id", "record_id", "user_id", "step", "attempt", "epoch", "error_class",
        "error_message", "at_ms", "step_version",
    }  # fmt: skip


async def test_show_one_record(redis: Any, keys: Keys, redis_url: str) -> None:
    """show prints a record's dead letter; a record without one is exit 1, none at all 4."""
    sm = await machine(redis, keys)
    await three_dead(sm)
    await start(sm, "mr-ok")
    res = cli(keys, redis_url, "dlq", "show", "mr-2")
    assert res.returncode == 0, res.stderr
    fields = dict(line.split(None, 1) for line in res.stdout.splitlines())
    assert fields["step"] == "parser" and fields["message"] == "no table in mr-2"
    doc = cli_json(keys, redis_url, "dlq", "show", "mr-1")
    assert [d["step"] for d in doc["dead_letters"]] == ["router"]
    res = cli(keys, redis_url, "dlq", "show", "mr-ok")
    assert res.returncode == 1 and "has no dead letter" in res.stderr
    assert cli(keys, redis_url, "dlq", "show", "mr-none").returncode == 4
    assert cli(keys, redis_url, "dlq", "show", "bad id").returncode == 2


async def test_a_versioned_steps_dead_letter_shows_its_version(
    redis: Any, keys: Keys, redis_url: str
) -> None:
    """A dead letter of a step at version 2 says so in list, show and --json, and `saga
    show`'s failed row names the version (issue 34: failures, not only commits)."""
    sm = await machine(redis, keys)
    await start(sm, "mr-v")
    claim = await claim_next(sm, "router", "w1")
    req = FailRequest(action=FailAction.DEAD, error_class="ParseError",
                      error_message="no table", worker="w1", step_version=2)  # fmt: skip
    assert (await sm.fail(claim, req)).code.name == "OK"
    res = cli(keys, redis_url, "dlq", "list")
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines()[2].split()[:4] == ["mr-v", "u-1", "router", "v2"]
    fields = dict(line.split(None, 1) for line in cli(keys, redis_url, "dlq", "show", "mr-v")
                  .stdout.splitlines())  # fmt: skip
    assert fields["version"] == "2"
    doc = cli_json(keys, redis_url, "dlq", "show", "mr-v")
    assert [d["step_version"] for d in doc["dead_letters"]] == [2]
    shown = cli(keys, redis_url, "show", "mr-v")
    assert shown.returncode == 0, shown.stderr
    assert any("router v2" in line and "dead" in line for line in shown.stdout.splitlines())


async def test_replay_dry_run_changes_nothing(redis: Any, keys: Keys, redis_url: str) -> None:
    """--dry-run lists what would be replayed and writes nothing."""
    await three_dead(await machine(redis, keys))
    before = await snapshot(redis, keys)
    doc = cli_json(keys, redis_url, "dlq", "replay", "--dry-run")
    assert doc["dry_run"] is True
    assert [r["record_id"] for r in doc["replayed"]] == ["mr-1", "mr-2", "mr-3"]
    assert await snapshot(redis, keys) == before
    res = cli(keys, redis_url, "dlq", "replay", "--dry-run", "--step", "parser")
    assert res.stdout.splitlines()[0] == "would replay 2 saga(s):"


async def test_replay_reruns_from_the_failed_step(redis: Any, keys: Keys, redis_url: str) -> None:
    """replay re-runs each saga from its step in a new epoch and removes its dead letter."""
    await three_dead(await machine(redis, keys))
    res = cli(keys, redis_url, "dlq", "replay", "--step", "parser", "--limit", "1", "--yes")
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines() == ["replayed 1 saga(s):", "  mr-2  from parser"]
    assert await redis.hmget(keys.saga("mr-2"), "state", "step", "epoch") == [
        b"pending", b"parser", b"2",
    ]  # fmt: skip
    doc = cli_json(keys, redis_url, "dlq", "replay", "--yes")
    assert doc["replayed"] == [{"record_id": "mr-1", "step": "router"},
                               {"record_id": "mr-3", "step": "parser"}]  # fmt: skip
    assert doc["errors"] == [] and doc["skipped"] == []
    assert cli_json(keys, redis_url, "dlq", "list")["dead_letters"] == []


async def test_replay_skips_stale_dead_letters(redis: Any, keys: Keys, redis_url: str) -> None:
    """A dead letter whose saga has moved on is skipped, not re-run."""
    sm = await machine(redis, keys)
    await run_to_dead(sm, "mr-1", "router")
    await start(sm, "mr-2")
    fields = {"rid": "mr-2", "uid": "u-1", "s": "router", "a": 1, "ep": 1, "ec": "X", "em": "y",
              "t": 1}  # fmt: skip
    await redis.xadd(keys.dead(0, "router"), fields)  # the saga does not name this letter
    doc = cli_json(keys, redis_url, "dlq", "replay", "--yes")
    assert doc["replayed"] == [{"record_id": "mr-1", "step": "router"}]
    assert doc["skipped"] == [{"record_id": "mr-2", "step": "router", "reason": "stale"}]
    assert await redis.hget(keys.saga("mr-2"), "epoch") == b"1"


async def test_purge_needs_yes(redis: Any, keys: Keys, redis_url: str) -> None:
    """purge without --yes is refused (exit 2, nothing deleted); with it, letters go, sagas stay."""
    await three_dead(await machine(redis, keys))
    res = cli(keys, redis_url, "dlq", "purge")
    assert res.returncode == 2 and "--yes" in res.stderr
    assert await redis.xlen(keys.dead(0, "parser")) == 2
    doc = cli_json(keys, redis_url, "dlq", "purge", "--step", "parser", "--yes")
    assert doc == {"purged": 2, "steps": ["parser"]}
    assert await redis.xlen(keys.dead(0, "parser")) == 0
    assert await redis.xlen(keys.dead(0, "router")) == 1
    assert await redis.hget(keys.saga("mr-2"), "state") == b"failed"
    res = cli(keys, redis_url, "dlq", "purge", "--yes")
    assert res.returncode == 0 and res.stdout.startswith("purged 1 dead letter(s)")


async def test_bad_usage_exits_2(redis: Any, keys: Keys, redis_url: str) -> None:
    """No verb, an unknown step or a bad --limit is bad usage."""
    await machine(redis, keys)
    assert cli(keys, redis_url, "dlq").returncode == 2
    res = cli(keys, redis_url, "dlq", "list", "--step", "nosuch")
    assert res.returncode == 2 and "grouper, parser, router" in res.stderr
    assert cli(keys, redis_url, "dlq", "list", "--limit", "0").returncode == 2


async def test_bulk_retry_agrees_with_dlq_list_after_a_purge(
    redis: Any, keys: Keys, redis_url: str
) -> None:
    """After a purge, `retry --failed --dry-run` counts what `dlq list` shows (1, not 4),
    names the purged sagas it left out, and retries only the one."""
    sm = await machine(redis, keys)
    for rid in ("mr-a", "mr-b", "mr-c"):
        await run_to_dead(sm, rid, "parser")
    assert cli_json(keys, redis_url, "dlq", "purge", "--step", "parser", "--yes")["purged"] == 3
    await run_to_dead(sm, "mr-d", "parser")
    letters = cli_json(keys, redis_url, "dlq", "list", "--step", "parser")["dead_letters"]
    dry = cli_json(keys, redis_url, "retry", "--step", "parser", "--failed", "--dry-run")
    assert [d["record_id"] for d in letters] == dry["matched"] == ["mr-d"]
    assert sorted(dry["without_dead_letter"]) == ["mr-a", "mr-b", "mr-c"]
    text = cli(keys, redis_url, "retry", "--step", "parser", "--failed", "--dry-run").stdout
    assert "would retry 1 saga(s)" in text and "left out 3 failed saga(s)" in text
    assert cli_json(keys, redis_url, "retry", "--step", "parser", "--failed", "--yes")[
        "retried"
    ] == ["mr-d"]


async def test_bulk_actions_without_yes_are_dry_runs(
    redis: Any, keys: Keys, redis_url: str
) -> None:
    """`dlq replay` and a bulk `retry --step S` with no --yes list what they would do and
    change nothing (as purge needs --yes); the sentence says how to confirm."""
    await three_dead(await machine(redis, keys))
    before = await snapshot(redis, keys)
    res = cli(keys, redis_url, "dlq", "replay")
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines()[0] == "would replay 3 saga(s):" and "--yes" in res.stdout
    assert cli_json(keys, redis_url, "dlq", "replay")["dry_run"] is True
    res = cli(keys, redis_url, "retry", "--step", "parser")
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("would retry 2 saga(s)") and "--yes" in res.stdout
    doc = cli_json(keys, redis_url, "retry", "--step", "parser", "--failed")
    assert doc["dry_run"] is True and doc["retried"] == []
    assert await snapshot(redis, keys) == before
    res = cli(keys, redis_url, "retry", "mr-1", "--yes")
    assert res.returncode == 2 and "bulk form only" in res.stderr


async def test_show_fits_80_columns(redis: Any, keys: Keys, redis_url: str) -> None:
    """`COLUMNS=80 saga dlq show` wraps a long message under its label: no line over 80."""
    sm = await machine(redis, keys)
    await start(sm, "mr-long")
    from saga.state.model import FailAction
    from tests.cli.inspect_support import fail

    long = "the PDF has no extractable text (a scan without a text layer?); it needs OCR first"
    await fail(sm, "router", FailAction.DEAD, error=("InvalidInputError", long))
    res = cli(keys, redis_url, "dlq", "show", "mr-long", env={"COLUMNS": "80"})
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert max(map(len, lines)) <= 80, lines
    assert " ".join(x.strip() for x in lines[7:9]) == f"message  {long}"
