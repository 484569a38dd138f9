"""Schedules as an App declares them: ``ScheduleSpec``, cron arithmetic, the input.

Cron expressions are five fields in UTC, parsed by croniter (``@hourly``-style
aliases too). The fire pass the controller runs is ``saga.controller.firing``; it
imports the client, so this module (which ``saga.App`` uses) stays free of it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import msgspec


@dataclass(frozen=True, slots=True)
class ScheduleSpec:
    """``@app.schedule``: a schedule the App declares, registered by its controller."""

    name: str
    cron: str
    user_id: str
    input: bytes
    """The first step's input, JSON (b"": the type's default)."""


def check_cron(cron: str) -> str:
    """``cron`` if croniter takes it, else ValueError in one sentence."""
    from croniter import croniter

    cron = " ".join(cron.split())
    if not cron or not croniter.is_valid(cron) or len(cron.split()) not in (1, 5):
        raise ValueError(
            f"cron {cron!r} is not five fields 'minute hour day month weekday' (UTC), "
            "e.g. '0 2 * * *' or '*/15 * * * *', or an alias such as @hourly"
        )
    return cron


def next_fire(cron: str, after_ms: int) -> int:
    """The first tick of ``cron`` strictly after ``after_ms`` (ms since the epoch, UTC)."""
    from croniter import croniter

    start = datetime.fromtimestamp(after_ms / 1000, UTC)
    nxt: datetime = croniter(cron, start).get_next(datetime)
    return int(nxt.timestamp() * 1000)


def input_json(value: Any) -> bytes:
    """A schedule's input: a Struct, a dict, JSON bytes or None (b"")."""
    if value is None:
        return b""
    return value if isinstance(value, bytes) else msgspec.json.encode(value)
