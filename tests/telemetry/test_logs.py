"""Log lines of real attempts: every line in a step's scope carries the ids; nothing leaks."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
import structlog
from structlog.testing import capture_logs

from saga.api.pipeline import Pipeline
from saga.state import reads
from saga.state.keys import Keys
from saga.telemetry.redact import redact
from saga.telemetry.scope import merge_scope

from .support import KEY, PAGE, PIPELINE, Count, Doc, client, executors, wait_until

pytestmark = pytest.mark.anyio

SCOPE = ("record_id", "user_id", "step", "attempt", "epoch", "worker", "trace_id", "span_id")
PROCESSORS = [merge_scope, redact]


def in_scope(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    lifecycle = {"step_claimed", "step_committed", "step_failed", "retry_scheduled"}
    return [e for e in events if e["event"] in lifecycle | {"dead_lettered", "counted"}]


async def test_every_line_in_a_step_scope_carries_the_ids(redis: Any, keys: Keys) -> None:
    """Lifecycle lines and the step's own lines hold record, user, step, attempt, epoch,
    worker, trace and span ids."""
    with capture_logs(processors=PROCESSORS) as events:
        async with executors(redis, keys, {"w-1": ["extract", "count"]}):
            await client(redis, keys).start("rec-ok", "user-1", document="fine")
            (saga,) = await wait_until(redis, keys, ["rec-ok"])
    assert saga.state == "completed"
    scoped = in_scope(events)
    assert {e["event"] for e in scoped} >= {"step_claimed", "step_committed", "counted"}
    for e in scoped:
        missing = [k for k in SCOPE if k not in e]
        assert not missing, (e["event"], missing)
        assert e["record_id"] == "rec-ok" and e["user_id"] == "user-1" and e["worker"] == "w-1"
    committed = [e for e in scoped if e["event"] == "step_committed"]
    assert [e["step"] for e in committed] == ["extract", "count"]
    assert all(e["duration_seconds"] >= 0 for e in committed)


async def test_a_planted_key_and_page_text_never_reach_logs_history_or_dead_letters(
    redis: Any, keys: Keys
) -> None:
    """A step's exception echoing page text and a key: logs, saga error, history and the
    dead letter keep the class and where it was raised, never the text."""
    with capture_logs(processors=PROCESSORS) as events:
        async with executors(redis, keys, {"w-1": ["extract", "count"]}):
            await client(redis, keys).start("rec-bad", "user-1", document="broken")
            (saga,) = await wait_until(redis, keys, ["rec-bad"])
    assert saga.state == "failed"
    history = await reads.get_history(redis, keys, "rec-bad")
    dead = await dlq_entries(redis, keys)
    stored = [saga.error_message, *(h.error_message for h in history), *dead]
    texts = [repr(events), *stored]
    for text in texts:
        assert KEY not in text
        assert "sk-planted" not in text
        assert "Jane Roe" not in text
        assert "Hemoglobin" not in text
    failed = [e for e in events if e["event"] == "step_failed"]
    assert len(failed) == 2  # the first attempt retried, the second dead-lettered
    assert all(e["error_class"] == "ValueError" for e in failed)
    assert "message withheld" in saga.error_message
    assert "support.py" in saga.error_message  # where it was raised
    assert saga.error_message.endswith("(gave up after 2 attempts)")
    assert {e["event"] for e in events} >= {"retry_scheduled", "dead_lettered"}


async def dlq_entries(redis: Any, keys: Keys) -> list[str]:
    raw = await redis.xrange(keys.dead(0, "extract"))
    return [repr(fields) for _, fields in raw]


async def test_adapter_lines_inside_an_attempt_carry_the_scope(redis: Any, keys: Keys) -> None:
    """A module-level logger (as adapters use) inside a step gets the ids from contextvars."""
    adapter_log = structlog.get_logger("saga.llm")

    async def step(ctx: Any, inp: Doc) -> Count:
        adapter_log.info("llm_call", model="m", prompt=PAGE)
        return Count(n=1)

    pipeline = Pipeline((replace(PIPELINE.steps[0], fn=step), PIPELINE.steps[1]))
    with capture_logs(processors=PROCESSORS) as events:
        async with executors(redis, keys, {"w-2": ["extract", "count"]}, pipeline=pipeline):
            await client(redis, keys, pipeline).start("rec-ad", "user-2")
            await wait_until(redis, keys, ["rec-ad"])
    (line,) = [e for e in events if e["event"] == "llm_call"]
    assert {k: line[k] for k in ("record_id", "user_id", "step", "worker")} == {
        "record_id": "rec-ad",
        "user_id": "user-2",
        "step": "extract",
        "worker": "w-2",
    }
    assert line["prompt"] == "***"  # a content field never passes
    outside = [e for e in events if e["event"] in ("worker_started", "worker_stopped")]
    assert outside and all("record_id" not in e for e in outside)  # the scope ends
