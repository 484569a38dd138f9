"""Result cards: names on one line, their values on the next, then references and status.

A summary page prints results as cards side by side::

    LDL Cholesterol            Vitamin D, 25-OH
    162 mg/dL                  18 ng/mL
    Reference: 0-99 mg/dL      Reference: 30-100 ng/mL
    Above range                Below range

The layout text keeps the columns apart, so a line whose cells are all analyte
names, followed by a line with as many cells that are all bare results (a value
and a unit), pairs them column by column. Reference and status lines below,
with one cell per card, add the ranges and flags.
"""

from __future__ import annotations

import re

from msgspec.structs import replace

from saga.steps.lab_cells import Cell, cells_of
from saga.steps.lab_rows import Row, is_analyte_name, parse_rows
from saga.steps.lab_values import (
    VALUE_AT,
    Range,
    biomarker,
    compute_flag,
    parse_range,
    parse_result,
)
from saga.steps.models import Flag

_REFERENCE = re.compile(
    r"(?i)(?:ref(?:erence)?(?:\s+(?:range|interval))?|normal(?:\s+range)?|range)\s*:?\s*(?P<range>.+)"
)
_STATUS = {
    "above range": Flag.HIGH,
    "below range": Flag.LOW,
    "in range": Flag.NORMAL,
    "within range": Flag.NORMAL,
    "high": Flag.HIGH,
    "low": Flag.LOW,
    "normal": Flag.NORMAL,
}


def card_rows(names: str, values: str, details: list[str]) -> tuple[list[Row], int]:
    """The cards of ``names`` over ``values``, and how many of ``details`` they used."""
    name_cells, value_cells = cells_of(names), cells_of(values)
    if len(name_cells) == 1 and len(value_cells) > 1:
        return _stacked(name_cells[0], values), 0
    if not name_cells or len(name_cells) != len(value_cells):
        return [], 0
    if not all(is_analyte_name(cell.text) for cell in name_cells):
        return [], 0
    rows = [_card(name, value, values) for name, value in zip(name_cells, value_cells, strict=True)]
    if any(row is None for row in rows):
        return [], 0
    found = [row for row in rows if row is not None]
    used = 0
    for line in details[:2]:
        more = _with_details(found, cells_of(line))
        if more is None:
            break
        found, used = more, used + 1
    return found, used


def _stacked(name: Cell, values: str) -> list[Row]:
    """One name above a whole result row (``22 L ng/mL  (ref 30-400)``): read as one row.

    Only when the line below starts with the value and, read after the name, gives
    exactly one result of that name; the value's span is the one in ``values``.
    """
    if not is_analyte_name(name.text) or not values.lstrip()[:1].isdigit():
        return []
    prefix = f"{name.text}  "
    rows = parse_rows(prefix + values)
    if len(rows) != 1 or rows[0].biomarker.name != name.text or rows[0].start < len(prefix):
        return []
    row = rows[0]
    return [Row(row.biomarker, row.start - len(prefix), row.end - len(prefix))]


def _card(name: Cell, value: Cell, line: str) -> Row | None:
    if not value.text[:1].isdigit() and value.text[:1] not in "<>":
        return None
    result = parse_result(value.text)
    match = VALUE_AT.match(line, value.start)
    if result is None or not result.unit or match is None:
        return None
    start, end = match.span("v")
    return Row(biomarker(name.text, result), start, end)


def _with_details(rows: list[Row], cells: list[Cell]) -> list[Row] | None:
    if len(cells) != len(rows):
        return None
    ranges = [_reference(cell.text) for cell in cells]
    if all(rng is not None for rng in ranges):
        return [_ranged(row, rng) for row, rng in zip(rows, ranges, strict=True) if rng]
    flags = [_STATUS.get(" ".join(cell.text.lower().split())) for cell in cells]
    if all(flag is not None for flag in flags):
        return [
            Row(replace(row.biomarker, flag=flag), row.start, row.end)
            for row, flag in zip(rows, flags, strict=True)
            if flag is not None
        ]
    return None


def _reference(text: str) -> Range | None:
    match = _REFERENCE.fullmatch(text)
    if match is None:
        return None
    words = match.group("range").split()
    # "0-99 mg/dL": the unit after the range is the card's own
    return parse_range(" ".join(words[:-1])) or parse_range(" ".join(words))


def _ranged(row: Row, rng: Range) -> Row:
    found = row.biomarker
    flag = compute_flag(found.value, rng, found.comparator)
    updated = replace(
        found,
        reference_low=rng.low,
        reference_high=rng.high,
        reference_text=rng.text,
        flag=flag if found.flag is Flag.UNKNOWN else found.flag,
    )
    return Row(updated, row.start, row.end)
