"""The redaction processor: allow-listed fields pass, secrets and content never do."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from saga.steps.errors import InvalidInputError, RetryableError
from saga.telemetry.redact import exception_text, redact, safe_error, scrub_text

from .support import KEY, PAGE

REPO = Path(__file__).resolve().parents[2]


def run(**fields: Any) -> dict[str, Any]:
    return dict(redact(None, "info", dict(fields)))


@pytest.mark.parametrize(
    "secret",
    [
        KEY,
        "sk-ant-api03-AbCdEf123456",
        "Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl",
        "AKIAABCDEFGHIJKLMNOP",
        "api_key=0123456789abcdef",
        "redis://default:hunter22@cache:6379/0",
    ],
)
def test_key_like_text_is_masked_in_free_text(secret: str) -> None:
    """An error field keeps its words and loses anything shaped like a key."""
    out = run(event="step_failed", error=f"call failed with {secret} (401)")
    assert "call failed with" in out["error"] and "(401)" in out["error"]
    assert "hunter22" not in out["error"]
    for part in (KEY, "AbCdEf123456", "c2lnbmF0dXJl", "ABCDEFGHIJKLMNOP", "0123456789abcdef"):
        assert part not in out["error"]


def test_allowed_fields_pass_and_unknown_ones_are_judged() -> None:
    """Ids and numbers pass; unknown short strings pass, content names, keys and long
    text are masked; containers are not logged."""
    out = run(
        event="step_committed",
        record_id="mr-1",
        attempt=2,
        duration_seconds=0.5,
        colour="blue",
        prompt="hello",
        page_text="x",
        authorization="abc",
        note=PAGE * 3,
        rows=[PAGE],
        tokens_used=12,
    )
    assert (out["record_id"], out["attempt"], out["duration_seconds"]) == ("mr-1", 2, 0.5)
    assert out["colour"] == "blue" and out["tokens_used"] == 12
    assert out["prompt"] == out["page_text"] == out["authorization"] == "***"
    assert out["note"].startswith("[redacted") and out["rows"] == "[redacted list]"


def test_free_text_is_truncated() -> None:
    """A long error is cut, saying how much was dropped."""
    out = run(event="x", error="e" * 50 + " " + "word " * 200)
    assert len(out["error"]) < 400 and out["error"].endswith("chars)")


def test_exception_info_becomes_a_short_safe_string() -> None:
    """exc_info is replaced by type, safe message and frames; never locals or page text."""
    page = PAGE  # a local the traceback must not show

    try:
        raise ValueError(f"bad row {page} for {KEY}")
    except ValueError:
        out = run(event="oops", exc_info=True)
    assert "exc_info" not in out
    assert out["exception"].startswith("ValueError (message withheld")
    assert "test_redact.py" in out["exception"]
    assert "Jane Roe" not in out["exception"] and KEY not in out["exception"]


def test_saga_errors_keep_their_scrubbed_message_others_are_withheld() -> None:
    """Step errors are written to be safe; library errors can echo anything."""
    assert exception_text(InvalidInputError(f"no rows (key {KEY})")) == "no rows (key ***)"
    try:
        raise KeyError(PAGE)
    except KeyError as exc:
        text = exception_text(exc)
    assert text.startswith("KeyError (message withheld: not a saga error) at ")
    assert "Jane" not in text
    raw = RetryableError("LLM call failed: RateLimitError (429)")
    assert safe_error(raw, f"{raw} (gave up after 5 attempts)") == (
        "LLM call failed: RateLimitError (429) (gave up after 5 attempts)"
    )
    assert safe_error(ValueError(PAGE), f"{PAGE} (gave up after 2 attempts)").endswith(
        "(message withheld: not a saga error) (gave up after 2 attempts)"
    )


def test_scrub_text_leaves_ids_and_numbers() -> None:
    """Record ids, step names, trace ids and numbers are not mistaken for keys."""
    text = "saga mr-2024-0001 at parser, trace 4bf92f3577b34da6a3ce929d0e0e4736, 1700000000000-0"
    assert scrub_text(text) == text


def test_configured_process_logs_json_through_redaction() -> None:
    """A real process: configure_logging('json') renders redacted JSON lines on stderr,
    stdlib records included, litellm's loggers silenced."""
    code = f"""
import logging, structlog
from saga.wiring.logs import configure_logging
configure_logging("json", "info")
log = structlog.get_logger("saga.worker")
log.info("step_failed", record_id="mr-1", error="echo {KEY}", prompt="{PAGE}")
logging.getLogger("httpx").warning("request with Authorization: Bearer {KEY}")
logging.getLogger("LiteLLM").error("prompt was {PAGE}")
"""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    )
    lines = [json.loads(line) for line in done.stderr.splitlines()]
    assert [line["event"].split()[0] for line in lines] == ["step_failed", "request"]
    first, second = lines
    assert first["record_id"] == "mr-1" and first["level"] == "info" and "timestamp" in first
    assert first["error"] == "echo ***" and first["prompt"] == "***"
    assert second["logger"] == "httpx" and KEY not in second["event"]
    assert "Jane Roe" not in done.stderr and KEY not in done.stderr
