"""Cumulative reports: one column per collection date, the current result in one of them.

``Test  05/03/24  18/12/23  02/09/23  Units  Range`` heads a table whose rows hold
a result per date (``Haemoglobin  118L  126  131  g/L  130-180``). Reading the row
as ``name value ...`` would take whichever number comes first; here the value is
the cell under the **latest** date, and the other dated cells are kept as
``previous`` with their dates. When the dates cannot be ordered (``03/04/24`` and
``04/03/24`` read either way), or a row's cells cannot be placed under the header's
columns for certain, nothing is read: the line stays result-like and unexplained, and the
parser asks for review.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass

from saga.steps.lab_cells import Cell, cells_of

_DATE = re.compile(
    r"(?P<a>\d{1,4})[./-](?P<b>\d{1,2}|[A-Za-z]{3})[./-](?P<c>\d{2,4})"
    r"(?:\s+\d{1,2}:\d{2})?"
)
_MONTH_NAMES = "jan feb mar apr may jun jul aug sep oct nov dec"
_MONTHS = {m: i for i, m in enumerate(_MONTH_NAMES.split(), 1)}
ALIGN_SLACK = 3
"""Characters a row's cell may start away from its header cell and still be under it."""


@dataclass(frozen=True, slots=True)
class DatedHeader:
    """Where each column of a cumulative table starts, and which dated column is current."""

    starts: tuple[int, ...]
    dates: dict[int, str]
    """Column index -> the date as printed."""
    current: int


def _readings(text: str) -> list[dt.date]:
    """Every date ``text`` can be (day-month and month-day orders, two-digit years)."""
    match = _DATE.fullmatch(text.strip())
    if match is None:
        return []
    a, b, c = match.group("a"), match.group("b").lower(), match.group("c")
    year_first = len(a) == 4
    year = int(a if year_first else c)
    year += 2000 if year < 100 else 0
    if b.isalpha():
        orders = [(_MONTHS.get(b[:3], 0), int(a))]
    elif year_first:
        orders = [(int(b), int(c))]
    else:
        orders = [(int(b), int(a)), (int(a), int(b))]  # day first, then month first
    found = []
    for month, day in orders:
        try:
            found.append(dt.date(year, month, day))
        except ValueError:
            continue
    return found


def _orders(dates: dict[int, str]) -> tuple[int, ...]:
    """The day/month orders the dates allow together: one date with a day over 12
    (``20/10/23``) settles the order for all of them."""
    readings = [_readings(text) for text in dates.values()]
    if all(len(r) == 1 for r in readings):
        return (0,)
    day_first = all(len(r) >= 1 for r in readings)
    settled = [_DATE.fullmatch(t.strip()) for t in dates.values()]
    firsts = [
        int(m.group("a"))
        for m in settled
        if m and m.group("b").isdigit() and len(m.group("a")) <= 2
    ]
    seconds = [
        int(m.group("b"))
        for m in settled
        if m and m.group("b").isdigit() and len(m.group("a")) <= 2
    ]
    if day_first and any(a > 12 for a in firsts):
        return (0,)
    if any(b > 12 for b in seconds):
        return (1,)
    return (0, 1)


def _latest(dates: dict[int, str]) -> int | None:
    """The column of the latest date, when every way of reading the dates agrees."""
    picks = set()
    for order in _orders(dates):
        chosen = {}
        for column, text in dates.items():
            readings = _readings(text)
            if not readings:
                return None
            chosen[column] = readings[min(order, len(readings) - 1)]
        picks.add(max(chosen, key=lambda column: chosen[column]))
    return picks.pop() if len(picks) == 1 else None


def parse_dated_header(line: str) -> DatedHeader | None:
    """A header with two or more dated columns whose latest date can be told, or None."""
    cells = cells_of(line)
    dates = {i: c.text for i, c in enumerate(cells) if i > 0 and _readings(c.text)}
    if len(dates) < 2 or not cells[0].text[:1].isalpha():
        return None
    current = _latest(dates)
    if current is None:
        return None
    return DatedHeader(tuple(c.start for c in cells), dates, current)


def place(header: DatedHeader, line: str) -> dict[int, Cell] | None:
    """The row's cells by header column, or None when they cannot be placed for certain.

    A row with as many cells as the header maps one to one. A row with fewer (an
    empty earlier result) is placed by where its cells start, when the text keeps
    the columns' positions; otherwise which column is empty cannot be told, and
    guessing could make an earlier result the current one.
    """
    cells = cells_of(line)
    if len(cells) == len(header.starts):
        return dict(enumerate(cells))
    placed: dict[int, Cell] = {}
    for each in cells:
        column = min(range(len(header.starts)), key=lambda i: abs(header.starts[i] - each.start))
        if column in placed or abs(header.starts[column] - each.start) > ALIGN_SLACK:
            return None
        placed[column] = each
    return placed if 0 in placed else None
