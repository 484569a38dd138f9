"""A saga's history as attempts on a shared time axis (``saga show``).

Pure functions of the saga and its events: attempts from their end events, from
reclaims and from the saga's running attempt; drawing proportional bars; laying
out the rows. No Redis, no clock: ``now_ms``
is a parameter, so tests can render a timeline from hand-built events.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import msgspec

from saga.cli.attempts import Attempt, Row, pair
from saga.cli.common import colour, fmt_duration
from saga.cli.tables import GAP, clip, fit, visible_len
from saga.state.model import EventType, HistoryEvent, Lane, MapRun, Saga, SagaState
from saga.telemetry.redact import reference_text

E = EventType
LABELS = {
    "committed": ("ok", "32"),
    "retry_scheduled": ("retry", "33"),
    "parked": ("parked", "33"),
    "dead_lettered": ("dead", "31"),
    "fenced": ("fenced", "35"),
    "lease_expired": ("lease expired", "31"),
    "running": ("running", "36"),
    "cancelled": ("cancelled", "90"),
    "superseded": ("superseded", "90"),
}
"""Outcome → (label for people, colour on a TTY)."""


class SagaView(msgspec.Struct, kw_only=True):
    """The saga fields ``saga show --json`` prints (outputs are left out)."""

    record_id: str
    user_id: str
    state: SagaState
    step: str
    epoch: int
    created_ms: int
    updated_ms: int
    worker: str
    lease_until_ms: int
    due_ms: int
    document: str
    error_class: str
    error_message: str
    attempts: dict[str, int]
    costs: dict[str, float]
    total_cost: float
    needs_review: bool = False
    review: dict[str, str] = {}
    """Step -> why its output needs a person's look (``saga list --review``)."""
    parked_reason: str = ""
    """``budget`` or ``circuit`` while it waits with its attempt refunded; else ""."""
    error_detail: str = ""
    """The error's operator detail (a path, a URL), opened with ``SAGA_DATA_KEY``; "" without
    a key, and always "" for a console viewer."""
    lanes: tuple[Lane, ...] = ()
    """While its branches run: each step in flight with its own state (docs/sagas.md)."""
    maps: tuple[MapRun, ...] = ()
    """Its map steps of this epoch: items by state, and each item (docs/sagas.md, maps)."""


def saga_view(s: Saga) -> SagaView:
    return SagaView(
        record_id=s.record_id,
        user_id=s.user_id,
        state=s.state,
        step=s.step,
        epoch=s.epoch,
        created_ms=s.created_ms,
        updated_ms=s.updated_ms,
        worker=s.worker,
        lease_until_ms=s.lease_until_ms,
        due_ms=s.due_ms,
        document=reference_text(s.document),
        error_class=s.error_class,
        error_message=s.error_message,
        attempts=s.attempts,
        costs=s.costs,
        total_cost=round(s.total_cost, 9),
        needs_review=s.needs_review,
        review=s.review,
        parked_reason=s.parked_reason,
        error_detail=s.error_detail,
        lanes=s.lanes,
        maps=s.maps,
    )


# -- drawing ------------------------------------------------------------------------

_EIGHTHS = " ▏▎▍▌▋▊▉█"


def axis(events: Sequence[HistoryEvent], running: bool, now_ms: int) -> tuple[int, int]:
    """The shared time axis: first event to last (or to now while the saga runs)."""
    if not events:
        return now_ms, now_ms + 1
    t0, t1 = events[0].at_ms, events[-1].at_ms
    if running:
        t1 = max(t1, now_ms)
    return t0, max(t1, t0 + 1)


def bar(start: int, end: int, span: tuple[int, int], width: int, fancy: bool) -> str:
    """A bar from ``start`` to ``end`` (ms) on ``span``; at least one cell wide."""
    scale = width / (span[1] - span[0])
    a = min(max((start - span[0]) * scale, 0.0), width - 1.0)
    b = min(max((end - span[0]) * scale, a), float(width))
    if not fancy:
        first = int(a)
        return " " * first + "#" * max(1, round(b) - first)
    first, full = int(a), int(b)
    tail = _EIGHTHS[int((b - full) * 8)] if full < width else ""
    body = "█" * (full - first) + tail.strip()
    return " " * first + (body or "▏")


def marker(at: int, span: tuple[int, int], width: int, fancy: bool) -> str:
    pos = min(int((at - span[0]) * width / (span[1] - span[0])), width - 1)
    return " " * max(pos, 0) + ("│" if fancy else "|")


def money(usd: float) -> str:
    if not usd:
        return "-"
    return f"${usd:.6f}" if usd < 0.0001 else f"${usd:.4f}"


def error_text(ec: str, em: str, limit: int | None) -> str:
    return clip(f"{ec}: {em}" if ec and em else ec or em, limit)


# -- layout -------------------------------------------------------------------------

HEADERS = ("step", "#", "ep", "worker", "start", "duration", "outcome", "error", "cost")
SHRINK = {"error": 12}
"""Cut first when the terminal is narrow: the error (full in ``--json``)."""
DROP = ("ep", "worker", "cost", "start", "#")
"""Then left out, in this order."""
BAR_MIN, BAR_MAX, BAR_PIPED = 10, 80, 30


def layout(
    saga: Saga,
    events: Sequence[HistoryEvent],
    now_ms: int,
    *,
    fancy: bool,
    columns: int | None,
    labels: Mapping[str, str] | None = None,
) -> tuple[list[str], list[list[str]]]:
    """Headers and cells of the timeline table; the last column is the bar. With
    ``columns`` (a terminal's width) the rows fit it: the error is cut, then
    low-value columns dropped, and the bar takes what is left (10 to 80
    characters); without, every column is whole and the bar 30 characters wide.
    ``fancy``: block characters and colour (a TTY). ``labels``: a step's row label
    (``saga.cli.branch_labels``: its parents, and a mark for a parallel step)."""
    span = axis(events, not saga.state.terminal, now_ms)
    rows = pair(events, now_ms, saga)
    cells = [_cells(r, labels or {}) for r in rows]
    headers = list(HEADERS)
    width = BAR_PIPED
    if columns is not None:
        headers, cells = fit(headers, cells, columns - BAR_MIN - GAP, shrink=SHRINK, drop=DROP)
        used = sum(max([len(h), *(visible_len(c[i]) for c in cells)]) + GAP
                   for i, h in enumerate(headers))  # fmt: skip
        width = min(max(columns - used, BAR_MIN), BAR_MAX)
    bars = [_bar_of(r, span, width, fancy, now_ms) for r in rows]
    took = fmt_duration((span[1] - span[0]) / 1000)
    head = f"timeline {took}" if len(took) + 9 <= width else took
    return [*headers, head], [[*c, b] for c, b in zip(cells, bars, strict=True)]


def _cells(r: Row, labels: Mapping[str, str]) -> list[str]:
    if isinstance(r, Attempt):
        label, code = LABELS[r.outcome]
        return [
            labels.get(r.step, r.step) + (f" v{r.step_version}" if r.step_version != 1 else ""),
            str(r.attempt),
            str(r.epoch),
            r.worker or "-",
            _clock(r.start_ms),
            fmt_duration(r.duration_ms / 1000),
            colour(label, code),
            error_text(r.error_class, r.error_message, None) or "-",
            money(r.cost),
        ]
    return [labels.get(r.step, r.step), "", str(r.epoch or ""), r.worker, _clock(r.at_ms), "",
            colour(r.event.value, "2"), _note(r), ""]  # fmt: skip


def _note(e: HistoryEvent) -> str:
    if e.event == E.FENCED:
        return f"late result refused ({e.detail})"
    return "" if e.event == E.STARTED else e.detail


def _bar_of(r: Row, span: tuple[int, int], width: int, fancy: bool, now_ms: int) -> str:
    if isinstance(r, HistoryEvent):
        return marker(r.at_ms, span, width, fancy)
    text = bar(r.start_ms, r.end_ms if r.end_ms is not None else now_ms, span, width, fancy)
    return colour(text, LABELS[r.outcome][1])


def _clock(ms: int) -> str:
    import time

    return time.strftime("%H:%M:%S", time.localtime(ms / 1000)) + f".{ms % 1000:03d}"
