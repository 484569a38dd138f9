"""saga show: the header, the timeline of attempts with bars, --json, --follow, exit codes."""

from __future__ import annotations

import json
import os
import pty
import subprocess
from typing import Any

import anyio
import pytest

from saga.cli.attempts import Attempt, pair
from saga.cli.timeline import axis, bar
from saga.state.keys import Keys
from saga.state.model import EventType, FailAction, HistoryEvent, Saga, SagaState
from saga.state.requests import FailRequest
from tests.cli.inspect_support import (
    cli,
    cli_json,
    commit,
    machine,
    python,
    retried_and_reclaimed,
    spawn,
    start,
)
from tests.state.helpers import claim_next, server_ms, wait_lease_expired

pytestmark = pytest.mark.anyio
HEAVY = ("litellm", "pypdf", "rapidfuzz", "httpx", "opentelemetry.exporter")


def rows_of(table: str) -> list[list[str]]:
    """The table's body rows, cut at the columns its dashed separator line marks."""
    import re

    lines = table.split("\n\n", 1)[1].splitlines()
    spans = [m.span() for m in re.finditer(r"-+", lines[1])]
    cut = [(a, spans[i + 1][0] if i + 1 < len(spans) else None) for i, (a, _) in enumerate(spans)]
    return [[line[a:b].strip() for a, b in cut] for line in lines[2:]]


async def test_timeline_shows_retried_and_reclaimed_attempts(
    redis: Any, keys: Keys, redis_url: str
) -> None:
    """A retried attempt, a lease that expired, its reclaim and the fenced late result."""
    await retried_and_reclaimed(await machine(redis, keys), "mr-1")
    res = cli(keys, redis_url, "show", "mr-1")
    assert res.returncode == 0, res.stderr
    head = dict(line.split(None, 1) for line in res.stdout.split("\n\n")[0].splitlines())
    assert head["state"] == "completed" and head["cost"] == "$0.0153" and head["user"] == "u-1"
    rows = rows_of(res.stdout)
    attempts = [r for r in rows if r[1].isdigit() and "#" in r[-1]]
    assert [(r[0], r[1], r[3], r[6]) for r in attempts] == [
        ("router", "1", "w1", "retry"),
        ("router", "2", "w1", "ok"),
        ("parser", "1", "w1", "lease expired"),
        ("parser", "2", "w2", "ok"),
        ("grouper", "1", "w3", "ok"),
    ]
    assert attempts[0][7:9] == ["TimeoutError: provider timed out", "$0.0010"]
    assert attempts[1][-2] == "$0.0020" and attempts[3][-2] == "$0.0123"
    markers = [r[6] for r in rows if not r[1].isdigit()]
    assert markers == ["started", "promoted", "fenced"]
    assert "late result refused (stale token 1:" in res.stdout


async def test_json_has_saga_attempts_and_events(redis: Any, keys: Keys, redis_url: str) -> None:
    """--json pairs each claim with its end and keeps the raw events, with stable names."""
    await retried_and_reclaimed(await machine(redis, keys), "mr-1")
    doc = cli_json(keys, redis_url, "show", "mr-1")
    assert set(doc) == {"saga", "attempts", "events"}
    assert doc["saga"]["total_cost"] == pytest.approx(0.0153)
    assert doc["saga"]["attempts"] == {"router": 2, "parser": 2, "grouper": 1}
    got = [
        (a["step"], a["attempt"], a["outcome"], a["cost"], a["reclaimed"]) for a in doc["attempts"]
    ]
    assert got == [
        ("router", 1, "retry_scheduled", 0.001, False),
        ("router", 2, "committed", 0.002, False),
        ("parser", 1, "lease_expired", 0.0, False),
        ("parser", 2, "committed", 0.0123, True),
        ("grouper", 1, "committed", 0.0, False),
    ]
    assert all(a["end_ms"] >= a["start_ms"] for a in doc["attempts"])
    kinds = [e["event"] for e in doc["events"]]
    assert kinds.count("fenced") == 1 and kinds[0] == "started" and kinds[-1] == "committed"


async def test_missing_record_exits_4_with_one_sentence(keys: Keys, redis_url: str) -> None:
    """A record that does not exist: exit 4 and one line on stderr, nothing on stdout."""
    res = cli(keys, redis_url, "show", "mr-nope")
    assert res.returncode == 4
    assert res.stdout == "" and res.stderr.count("\n") == 1 and "mr-nope" in res.stderr


@pytest.mark.parametrize("bad", ["mr 1", "{p0}x", "-x" * 70])
async def test_invalid_id_exits_2(keys: Keys, redis_url: str, bad: str) -> None:
    """An id that could break a key is refused as bad input."""
    res = cli(keys, redis_url, "show", "--", bad)
    assert res.returncode == 2, res.stderr
    assert "record id" in res.stderr


async def test_unreachable_redis_exits_3(keys: Keys) -> None:
    """REDIS_URL at a closed port: exit 3, one sentence that says what to check."""
    res = cli(keys, "redis://127.0.0.1:1", "show", "mr-1")
    assert res.returncode == 3
    assert res.stderr.count("\n") == 1 and "cannot reach Redis" in res.stderr
    assert "REDIS_URL" in res.stderr


async def test_follow_prints_new_events_until_terminal(
    redis: Any, keys: Keys, redis_url: str
) -> None:
    """--follow off a TTY: the timeline once, then one line per new event, exit at the end."""
    sm = await machine(redis, keys)
    await start(sm, "mr-f")
    proc = spawn(keys, redis_url, "show", "mr-f", "--follow", stdout=subprocess.PIPE)
    assert proc.stdout is not None
    try:
        with anyio.fail_after(20):  # the first render is printed before we move on
            while "timeline" not in await anyio.to_thread.run_sync(
                proc.stdout.readline, abandon_on_cancel=True
            ):
                pass
        for step in ("router", "parser", "grouper"):
            await commit(sm, step, cost=0.5 if step == "parser" else 0.0)
        out, _ = await anyio.to_thread.run_sync(lambda: proc.communicate(timeout=20))
    finally:
        proc.kill() if proc.poll() is None else None
    assert proc.returncode == 0
    lines = [line for line in out.splitlines() if " committed " in f" {line} "]
    assert [line.split()[3] for line in lines] == ["router", "parser", "grouper"]
    assert "$0.5000" in out


async def test_follow_json_prints_one_event_per_line(
    redis: Any, keys: Keys, redis_url: str
) -> None:
    """--follow --json on a finished saga: its events as JSON lines, then exit 0."""
    await retried_and_reclaimed(await machine(redis, keys), "mr-1")
    res = cli(keys, redis_url, "show", "mr-1", "--follow", "--json")
    assert res.returncode == 0, res.stderr
    events = [json.loads(line) for line in res.stdout.splitlines()]
    assert events[0]["event"] == "started" and events[-1]["event"] == "committed"


async def test_tty_draws_block_bars_and_colour(redis: Any, keys: Keys, redis_url: str) -> None:
    """On a terminal: block characters, ANSI colour and box lines; never '#' bars."""
    sm = await machine(redis, keys)
    await start(sm, "mr-t")
    claim = await claim_next(sm, "router", "w1")
    await wait_lease_expired(redis, await server_ms(redis) + 50)  # a visible duration
    req = FailRequest(action=FailAction.DEAD, error_class="ParseError", error_message="x" * 200)
    await sm.fail(claim, req)
    master, slave = pty.openpty()
    proc = spawn(keys, redis_url, "show", "mr-t", stdout=slave, stderr=slave, text=False)
    os.close(slave)
    chunks = []
    with anyio.fail_after(20):
        while True:
            try:
                data = await anyio.to_thread.run_sync(os.read, master, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not data:
                break
            chunks.append(data)
    os.close(master)
    assert proc.wait(timeout=20) == 0
    out = b"".join(chunks).decode()
    assert "█" in out and "\033[31m" in out and "─" in out
    assert "x" * 100 not in out and "…" in out  # long messages are cut on a TTY


async def test_cold_start_imports_nothing_heavy(redis: Any, keys: Keys, redis_url: str) -> None:
    """`saga show --json` never imports litellm, pypdf, rapidfuzz, httpx or OTel exporters."""
    await start(await machine(redis, keys), "mr-c")
    res = python(
        keys, redis_url, "-X", "importtime", "-m", "saga.cli.main", "show", "--json", "mr-c"
    )
    assert res.returncode == 0, res.stderr[-2000:]
    modules = {
        line.rsplit("|", 1)[-1].strip()
        for line in res.stderr.splitlines()
        if line.startswith("import time:")
    }
    assert {"saga.state.reads", "saga.cli.timeline", "redis.asyncio"} <= modules
    assert [m for m in modules if m.startswith(HEAVY)] == []
    # importlib.import_module (how main.py loads commands) is not traced by -X importtime,
    # so check sys.modules at exit as well.
    probe = (
        "import sys; from saga.cli.main import main; rc = main(sys.argv[1:]); "
        "print(*sys.modules, file=sys.stderr); sys.exit(rc)"
    )
    res = python(keys, redis_url, "-c", probe, "show", "--json", "mr-c")
    loaded = res.stderr.split()
    assert res.returncode == 0 and "saga.cli.cmd_show" in loaded
    # redis-py's optional OTel metrics too (saga.lean_imports hides them from its import)
    assert [m for m in loaded if m.startswith((*HEAVY, "opentelemetry.sdk"))] == []


def ev(kind: EventType, at: int, **kw: Any) -> HistoryEvent:
    return HistoryEvent(id=f"{at}-0", event=kind, at_ms=at, step=kw.pop("step", "parser"), **kw)


def running_saga(**kw: Any) -> Saga:
    fields: dict[str, Any] = dict(v=1, record_id="r", user_id="u", state=SagaState.RUNNING,
                                  step="parser", epoch=1, created_ms=1000, updated_ms=1100,
                                  worker="w1", claimed_ms=1100, attempts={"parser": 1})  # fmt: skip
    return Saga(**(fields | kw))


def test_the_running_attempt_comes_from_the_saga_and_runs_until_now() -> None:
    """Claims are not history events: the running attempt is read from the saga hash,
    and its duration and the axis run to ``now``."""
    events = [ev(EventType.STARTED, 1000, epoch=1)]
    (attempt,) = [r for r in pair(events, 5000, running_saga()) if not isinstance(r, HistoryEvent)]
    assert (attempt.step, attempt.attempt, attempt.worker, attempt.start_ms) == (
        "parser", 1, "w1", 1100,
    )  # fmt: skip
    assert attempt.outcome == "running" and attempt.duration_ms == 3900
    assert axis(events, True, 5000) == (1000, 5000)
    assert axis(events, False, 5000) == (1000, 1001)  # never empty
    done = running_saga(state=SagaState.COMPLETED)
    assert [r for r in pair(events, 5000, done) if not isinstance(r, HistoryEvent)] == []


def test_an_attempt_ending_is_drawn_from_its_duration() -> None:
    events = [ev(EventType.COMMITTED, 900, attempt=1, epoch=1, worker="w1", duration_ms=300)]
    (attempt,) = pair(events, 5000)
    assert isinstance(attempt, Attempt)
    assert (attempt.start_ms, attempt.end_ms, attempt.outcome) == (600, 900, "committed")


def test_a_reclaim_draws_the_lost_attempt_and_the_one_that_took_over() -> None:
    reclaim = ev(EventType.RECLAIMED, 2000, attempt=2, epoch=1, worker="w2",
                 previous_attempt=1, previous_worker="w1", previous_claimed_ms=1000)  # fmt: skip
    end = ev(EventType.COMMITTED, 2500, attempt=2, epoch=1, worker="w2", duration_ms=500)
    lost, taken = pair([reclaim, end], 5000, running_saga(state=SagaState.COMPLETED))
    assert isinstance(lost, Attempt) and isinstance(taken, Attempt)
    assert (lost.attempt, lost.worker, lost.start_ms, lost.end_ms, lost.outcome) == (
        1, "w1", 1000, 2000, "lease_expired",
    )  # fmt: skip
    assert (taken.attempt, taken.worker, taken.start_ms, taken.outcome) == (
        2, "w2", 2000, "committed",
    )  # fmt: skip
    assert taken.reclaimed
    # While the reclaimed attempt runs, the saga hash does not draw it a second time.
    rows = pair([reclaim], 5000, running_saga(worker="w2", claimed_ms=2000))
    assert [r.attempt for r in rows if isinstance(r, Attempt)] == [1, 2]


def test_cancel_and_operator_retry_close_open_attempts() -> None:
    """Cancel closes a running attempt as cancelled; a retry in a new epoch supersedes one."""
    claim = ev(EventType.RECLAIMED, 100, attempt=1, epoch=1, worker="w1")
    rows = pair([claim, ev(EventType.CANCELLED, 300, epoch=1)], 1000)
    assert rows[0].outcome == "cancelled" and rows[0].duration_ms == 200  # type: ignore[union-attr]
    rows = pair([claim, ev(EventType.RETRIED, 400, epoch=2)], 1000)
    assert rows[0].outcome == "superseded"  # type: ignore[union-attr]


def test_bars_are_proportional_on_the_shared_axis() -> None:
    """A bar starts and ends where its attempt does on the axis; at least one cell."""
    assert bar(0, 500, (0, 1000), 10, fancy=False) == "#####"
    assert bar(500, 1000, (0, 1000), 10, fancy=False) == "     #####"
    assert bar(999, 999, (0, 1000), 10, fancy=False) == "         #"
    assert bar(0, 1000, (0, 1000), 8, fancy=True) == "█" * 8
    assert bar(0, 125, (0, 1000), 4, fancy=True) == "▌"


async def test_an_attempt_running_at_cancel_stays_in_the_timeline(
    redis: Any, keys: Keys, redis_url: str
) -> None:
    """The attempt a cancel fenced out keeps its row (worker, start, outcome cancelled):
    claims are not history events, so the cancel records it."""
    sm = await machine(redis, keys)
    await start(sm, "mr-c")
    await commit(sm, "router")
    await claim_next(sm, "parser", "w-busy", lease_ms=60_000)
    assert cli(keys, redis_url, "cancel", "mr-c").returncode == 0
    doc = cli_json(keys, redis_url, "show", "mr-c")
    rows = [(a["step"], a["attempt"], a["worker"], a["outcome"]) for a in doc["attempts"]]
    assert rows == [("router", 1, "w1", "committed"), ("parser", 1, "w-busy", "cancelled")]
    assert doc["attempts"][1]["start_ms"] > 0
    assert "cancelled" in cli(keys, redis_url, "show", "mr-c").stdout.split("parser", 1)[1]
