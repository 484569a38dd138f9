"""Failing steps in a worker process: permanent errors dead-letter at once, retryable ones
after exactly SAGA_<STEP>_MAX_ATTEMPTS attempts with every error in the history, and a
step past SAGA_<STEP>_TIMEOUT is cancelled and retried as a StepTimeoutError."""

from __future__ import annotations

from typing import Any

import pytest

from saga.api.client import SagaClient
from saga.state.keys import Keys
from saga.state.model import EventType, HistoryEvent, SagaState
from saga.state.replies import text
from tests.executor import pipelines
from tests.executor.conftest import SpawnWorker
from tests.executor.support import (
    assert_one_commit_per_step,
    saga_and_history,
    states,
    wait_until,
)

_ATTEMPT_ENDS = (EventType.RETRY_SCHEDULED, EventType.DEAD_LETTERED, EventType.PARKED)

pytestmark = pytest.mark.anyio

ENV = {"SAGA_ROUTER_MAX_ATTEMPTS": "3", "SAGA_ROUTER_TIMEOUT": "0.5", "SAGA_ROUTER_LEASE": "1"}
FAILS = (EventType.RETRY_SCHEDULED, EventType.DEAD_LETTERED)


def failures(events: list[HistoryEvent]) -> list[tuple[int, str, str]]:
    """(attempt, event, error class) of every failed attempt, in order."""
    return [(e.attempt, e.event.value, e.error_class) for e in events if e.event in FAILS]


async def dead_letters(redis: Any, keys: Keys) -> dict[str, dict[str, str]]:
    rows = await redis.xrange(keys.dead(0, "router"))
    out = {}
    for _, fields in rows:
        f = {text(k): text(v) for k, v in fields.items()}
        out[f["rid"]] = f
    return out


async def test_permanent_retryable_and_timed_out_steps(
    spawn: SpawnWorker, sagas: SagaClient, redis: Any, keys: Keys
) -> None:
    """Permanent: dead at attempt 1; retryable, timing out: dead after 3; failing once: done."""
    w = spawn(**ENV)
    await w.wait_ready()
    rids = ["perm-1", "retry-1", "hang-1", "hangonce-1", "once-1"]
    for rid in rids:
        await sagas.start(rid, "u1")

    async def settled() -> bool:
        return all(s in ("failed", "completed") for s in await states(redis, keys, rids))

    await wait_until(settled, within=30, what="every saga failed or completed", every=0.05)
    got = dict(zip(rids, await states(redis, keys, rids), strict=True))
    assert got == {
        "perm-1": "failed",
        "retry-1": "failed",
        "hang-1": "failed",
        "hangonce-1": "completed",
        "once-1": "completed",
    }
    history = {rid: (await saga_and_history(redis, keys, rid))[1] for rid in rids}

    assert failures(history["perm-1"]) == [(1, "dead_lettered", "InvalidInputError")]
    assert failures(history["retry-1"]) == [
        (1, "retry_scheduled", "RuntimeError"),
        (2, "retry_scheduled", "RuntimeError"),
        (3, "dead_lettered", "RuntimeError"),
    ]
    # every attempt's error is in the history (a plain exception's message is withheld:
    # only saga errors' messages are known to be free of page text)
    messages = [e.error_message for e in history["retry-1"] if e.event in FAILS]
    assert len(messages) == 3 and all(m.startswith("RuntimeError") for m in messages), messages
    assert messages[2].endswith("(gave up after 3 attempts)")
    assert failures(history["hang-1"]) == [
        (1, "retry_scheduled", "StepTimeoutError"),
        (2, "retry_scheduled", "StepTimeoutError"),
        (3, "dead_lettered", "StepTimeoutError"),
    ]
    assert all("timeout of 0.5s" in e.error_message for e in history["hang-1"] if e.event in FAILS)
    assert failures(history["hangonce-1"]) == [(1, "retry_scheduled", "StepTimeoutError")]
    assert failures(history["once-1"]) == [(1, "retry_scheduled", "RuntimeError")]
    for rid in ("hangonce-1", "once-1"):
        saga, events = await saga_and_history(redis, keys, rid)
        assert_one_commit_per_step(saga, events, pipelines.STEPS)
        assert saga.attempts["router"] == 2
    for rid in ("perm-1", "retry-1", "hang-1"):
        saga, events = await saga_and_history(redis, keys, rid)
        assert saga.state == SagaState.FAILED and saga.step == "router"
        assert not [e for e in events if e.event == EventType.COMMITTED]
        ends = [e.attempt for e in events if e.event in _ATTEMPT_ENDS]
        assert ends == ([1] if rid == "perm-1" else [1, 2, 3])

    dead = await dead_letters(redis, keys)
    assert sorted(dead) == ["hang-1", "perm-1", "retry-1"]
    assert (dead["perm-1"]["a"], dead["perm-1"]["ec"]) == ("1", "InvalidInputError")
    assert (dead["retry-1"]["a"], dead["retry-1"]["ec"]) == ("3", "RuntimeError")
    assert (dead["hang-1"]["a"], dead["hang-1"]["ec"]) == ("3", "StepTimeoutError")
    assert w.alive()
