"""Geometry for the pages' SVG: the timeline's bars (as ``saga show`` draws them, from
the same pure functions) and the daily cost chart. No Redis, no clock: ``now_ms`` is
a parameter. Positions are in SVG user units; the templates draw the shapes, colours
come from the stylesheet (the CSP allows no inline style)."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from saga.cli.attempts import Attempt, pair
from saga.cli.common import fmt_duration
from saga.cli.timeline import LABELS, axis, error_text, money
from saga.state.model import EventType, HistoryEvent, Saga

WIDTH = 1000.0
"""The timeline's width in user units (the SVG stretches to its cell)."""
MARK = 4.0


@dataclass(frozen=True)
class TimelineRow:
    attempt: bool
    """An attempt (a bar), else another event (a marker)."""
    step: str
    number: str
    epoch: str
    worker: str
    start: str
    start_iso: str
    duration: str
    outcome: str
    outcome_key: str
    error: str
    cost: str
    x: float
    w: float


def timeline(
    saga: Saga,
    events: Sequence[HistoryEvent],
    now_ms: int,
    labels: Mapping[str, str] | None = None,
) -> list[TimelineRow]:
    """One row per attempt and per other event, in history order, on one time axis;
    ``labels``: a step's row label (``saga.cli.branch_labels``, for a type with branches)."""
    names = labels or {}
    span = axis(events, not saga.state.terminal, now_ms)
    scale = WIDTH / (span[1] - span[0])
    rows = []
    for r in pair(events, now_ms, saga):
        if isinstance(r, Attempt):
            end = r.end_ms if r.end_ms is not None else now_ms
            x = min(max((r.start_ms - span[0]) * scale, 0.0), WIDTH - MARK)
            w = max(min((end - span[0]) * scale, WIDTH) - x, MARK)
            rows.append(TimelineRow(
                True, names.get(r.step, r.step), str(r.attempt), str(r.epoch), r.worker or "-",
                clock(r.start_ms),
                iso(r.start_ms), fmt_duration(r.duration_ms / 1000), LABELS[r.outcome][0],
                r.outcome, error_text(r.error_class, r.error_message, None), money(r.cost),
                round(x, 2), round(w, 2),
            ))  # fmt: skip
        else:
            x = min(max((r.at_ms - span[0]) * scale, 0.0), WIDTH - MARK / 2)
            rows.append(TimelineRow(
                False, names.get(r.step, r.step), "", str(r.epoch or ""), r.worker,
                clock(r.at_ms), iso(r.at_ms),
                "", r.event.value, "event", _note(r), "", round(x, 2), MARK / 2,
            ))  # fmt: skip
    return rows


def span_text(events: Sequence[HistoryEvent], running: bool, now_ms: int) -> str:
    span = axis(events, running, now_ms)
    return fmt_duration((span[1] - span[0]) / 1000)


def _note(e: HistoryEvent) -> str:
    if e.event == EventType.FENCED:
        return f"late result refused ({e.detail})"
    if e.event == EventType.COMMITTED and e.review:
        return f"flagged for review: {e.review}"
    return "" if e.event == EventType.STARTED else e.detail


def clock(ms: int) -> str:
    """``HH:MM:SS.mmm`` in UTC (the pages say UTC once, in the column head)."""
    return time.strftime("%H:%M:%S", time.gmtime(ms / 1000)) + f".{ms % 1000:03d}"


def iso(ms: int) -> str:
    if not ms:
        return ""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ms / 1000)) + f".{ms % 1000:03d}Z"


def when(ms: int) -> str:
    """``YYYY-MM-DD HH:MM:SS`` UTC, or - for no time."""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(ms / 1000)) if ms else "-"


# -- the cost chart -----------------------------------------------------------------

CHART_W, CHART_H, LEFT, BOTTOM = 720.0, 200.0, 84.0, 22.0
"""The axis labels sit left of LEFT: wide enough for ``$0.000025`` at the tick font
(a top under a cent has six places; at 56 units it was clipped by the SVG's edge)."""


@dataclass(frozen=True)
class Bar:
    x: float
    y: float
    w: float
    h: float
    day: str
    usd: str


@dataclass(frozen=True)
class Chart:
    bars: list[Bar]
    top: str
    """The value of the top of the axis, in dollars."""
    labels: list[tuple[float, str]]
    """(x, day) under some bars."""
    left: float = LEFT
    base: float = CHART_H - BOTTOM
    right: float = CHART_W - 8


def cost_chart(by_day: Sequence[dict[str, Any]]) -> Chart:
    """A bar per day of the total cost, on an axis from 0 to a round maximum."""
    top = nice_max(max((float(d["usd"]) for d in by_day), default=0.0))
    plot_w, plot_h = CHART_W - LEFT - 8, CHART_H - BOTTOM - 8
    step = plot_w / max(len(by_day), 1)
    bars = []
    for i, d in enumerate(by_day):
        amount = float(d["usd"])
        h = plot_h * amount / top if top else 0.0
        x, y = round(LEFT + i * step + step * 0.15, 2), round(8 + plot_h - h, 2)
        bars.append(Bar(x, y, round(step * 0.7, 2), round(h, 2), str(d["day"]), money(amount)))
    every = max(1, len(by_day) // 6)
    labels = [(b.x + b.w / 2, b.day[5:]) for i, b in enumerate(bars) if i % every == 0]
    return Chart(bars, usd(top), labels)


def usd(value: float) -> str:
    """Dollars to the cent, or to six places under a cent (LLM calls cost fractions)."""
    if value >= 0.01 or value == 0:
        return f"${value:,.2f}" if value != int(value) else f"${value:,.0f}"
    return "$" + f"{value:.6f}".rstrip("0")


def nice_max(value: float) -> float:
    """The smallest of 1, 2, 2.5, 5 times a power of ten at or above ``value``."""
    if value <= 0:
        return 0.0
    power = 10.0 ** _floor_log10(value)
    for m in (1, 2, 2.5, 5, 10):
        if value <= m * power * (1 + 1e-12):
            return m * power
    return 10 * power


def _floor_log10(value: float) -> int:
    import math

    return math.floor(math.log10(value))
