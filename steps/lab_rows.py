"""One line of a lab report -> lab results, in the layouts the rules extractor knows.

* table rows with a header (``Test | Result | Unit | Reference Range | Flag``, or the
  same columns separated by tabs / runs of spaces): cells are read by the header;
* aligned rows without a header (``Hemoglobin A1c  6.1  %  4.0-5.6  H``): the
  first cell is the name, the rest a result;
* colon rows (``Hemoglobin A1c: 6.1 % (ref 4.0-5.6)``);
* single-space rows (``Glucose 105 mg/dL 70-99 H``): the name is the shortest
  prefix after which the rest reads as a result with a unit, range or flag;
* two results side by side (``Sodium  140  mmol/L    Potassium  4.1  mmol/L``).

Every row carries the span of its value in the line, so provenance can quote it.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass, replace

from msgspec.structs import replace as with_fields

from saga.steps.analytes import KNOWN_UNITS, unit_key
from saga.steps.cumulative import DatedHeader, place
from saga.steps.lab_cells import Cell, Header, cell, cells_of, row_cells
from saga.steps.lab_values import (
    QUALITATIVE,
    VALUE_AT,
    Range,
    Result,
    biomarker,
    final_flag,
    flag_of,
    parse_range,
    parse_result,
    words,
)
from saga.steps.models import Biomarker, Flag, PreviousValue

MAX_NAME_WORDS = 8
MAX_CELLS = 16
"""Cells of one line considered for results side by side (a justified paragraph has many)."""
MAX_NAME_CHARS = 60
# words that mark administrative lines ("Patient ID 12345", "Age: 45")
_NOT_ANALYTES = words(
    "patient name dob birth age mrn id date time phone fax account accession npi "
    "collected received reported specimen sex gender page zip room bed order "
    "requisition printed physician provider doctor lab laboratory address geboren datum"
)
# a name never ends with these ("Follow up in 2 weeks")
_DANGLING = words("in of at to for and or the was is are on by with from up after per von und")
_ANY_NUMBER = re.compile(r"\d+")
_STANDALONE_NUMBER = re.compile(r"(?<![\w.-])\d+(?:[.,]\d+)?(?=\s|$)")
_FLAG_IN_NAME = re.compile(r"[\u25b2\u25bc\u2191\u2193]|\((?:H|L|HH|LL)\)")
_NUMBER_THEN_UNIT = re.compile(r"(?<!\S)[<>\u2264\u2265]?\d+(?:[.,]\d+)?\s.*(?:/|%)")
_DATE_CELL = re.compile(r"\(?(?:\d{1,2}/\d{1,2}/\d{2,4}|\d{4}-\d{2}-\d{2})\)?")
_NUMBER_CELL = re.compile(r"[<>]?\d+(?:[.,]\d+)?")
_CODE_CELL = re.compile(r"\d{1,3}")
_LAB_CODE = re.compile(r"[A-Z][A-Z0-9]{0,3}|[0-9][A-Z][A-Z0-9]{0,2}")
_METHOD = re.compile(r"[A-Za-z][A-Za-z\-]{1,24}(?: [A-Za-z][A-Za-z\-]{1,24}){0,2}")
_DECIMAL = re.compile(r"\d+[.,]\d+")
# where a cell's name ends: a run of spaces, or the space before its value
_NAME_PART = re.compile(r"\s{2,}|\s(?=[<>\u2264\u2265]?\d)")
_VALUES_IN_NAME = re.compile(r"(?<!\S)\d+(?:HH|LL|H|L|\*)(?!\S)|(?<!\S)\d+\s+\d+(?!\S)")
_UNIT_CELL = re.compile(r"(?:x\s?)?10\^?\d+/\S+|\S*/\S*(?:l|L)\b|%|[a-zA-Zµμ]{1,4}/[a-zA-Zµμ]{1,4}")


@dataclass(frozen=True, slots=True)
class Row:
    """A result read from a line, and the span of its value in that line."""

    biomarker: Biomarker
    start: int
    end: int


@functools.lru_cache(maxsize=4096)
def is_analyte_name(name: str) -> bool:
    """A plausible analyte: letters, not too long, not an administrative label."""
    if len(name) > MAX_NAME_CHARS or not name[:1].isalnum() or ":" in name:
        return False
    words_ = re.findall(r"[a-z0-9]+", name.lower())
    return (
        sum(ch.isalpha() for ch in name) >= 2
        and name[0].isalnum()
        and ":" not in name
        and len(name) <= MAX_NAME_CHARS
        and 0 < len(words_) <= MAX_NAME_WORDS
        and not _NOT_ANALYTES.intersection(words_)
        and words_[-1] not in _DANGLING
        and not _DECIMAL.search(name)  # "Hemoglobin 11.2 g/dL 12.0 -" is not a name
        and not name.rstrip().endswith(("-", "\u2013", "/"))
        and not _FLAG_IN_NAME.search(name)  # "Glucose 160 ▲ (H) mg/dL"
        and not _NUMBER_THEN_UNIT.search(name)  # "162 mg/dL" is a result, not a name
        and not _VALUES_IN_NAME.search(name)  # "Haemoglobin 109L 121": earlier results
        and not _ends_in_unit(name)  # "Sodium mmol/l 133": the unit column, not the name
    )


def _ends_in_unit(name: str) -> bool:
    last = name.rsplit(maxsplit=1)[-1] if " " in name.strip() else ""
    return bool(last) and ("/" in last or last == "%") and unit_key(last) in KNOWN_UNITS


def parse_rows(line: str) -> list[Row]:
    """Every result on ``line``: one, or several side by side."""
    cells = cells_of(line) if len(_ANY_NUMBER.findall(line)) >= 2 else []
    for index in range(1, min(len(cells), MAX_CELLS)):  # two results need two numbers
        if not _may_open_result(cells[index].text):
            continue
        left = parse_row(line[: cells[index].start])
        if left is None:
            continue  # only a readable left part makes a split worth trying (keeps this linear)
        right = _shifted(parse_rows(line[cells[index].start :]), cells[index].start)
        if right:
            return [left, *right]
    row = parse_row(line)
    return [row] if row is not None else []


def _may_open_result(text: str) -> bool:
    first = text.split(maxsplit=1)[0]
    return (
        first[0].isalpha()
        and flag_of(first) is None
        and "-".join(text.lower().split()) not in QUALITATIVE
        and not _UNIT_CELL.fullmatch(first)
        and unit_key(first) not in KNOWN_UNITS
        and is_analyte_name(_NAME_PART.split(text, maxsplit=1)[0])
    )


def _shifted(rows: list[Row], offset: int) -> list[Row]:
    return [replace(row, start=row.start + offset, end=row.end + offset) for row in rows]


def parse_row(line: str) -> Row | None:
    """A lab row in aligned, colon or single-space layout, or None."""
    colon, number = line.find(":"), _STANDALONE_NUMBER.search(line)
    if colon >= 0 and (number is None or colon < number.start()):
        return _colon_row(line)  # a colon after the value is the range's ("Normal: 70-99")
    cells = cells_of(line)
    if len(cells) >= 2 and is_analyte_name(cells[0].text):
        found = _cells_row(line, cells)
        if found is not None:
            return found
    return _token_row(line)


def _colon_row(line: str) -> Row | None:
    name, _, rest = line.partition(":")
    name = name.strip()
    if not is_analyte_name(name):
        return None
    at = line.index(":") + 1
    result = parse_result(rest)
    if result is not None:
        return _row(line, at, biomarker(name, result))
    word = rest.strip()
    if _qualitative_key(word) in QUALITATIVE:
        return _word_row(line, name, Cell(word, line.index(word, at)), "", None)
    return None


def clean_cells(cells: list[Cell]) -> list[Cell]:
    """Cells without a previous result and its date, or a trailing performing-lab code.

    ``WBC  7.9  8.2  09/14/2023  x10E3/uL  3.4-10.8  01``: 8.2 is last time's result,
    01 the lab that ran the test; neither belongs to this result.
    """
    kept: list[Cell] = []
    for each in cells:
        previous = len(kept) >= 3 and _NUMBER_CELL.fullmatch(kept[-1].text)
        if previous and _DATE_CELL.fullmatch(each.text):
            kept.pop()
            continue
        kept.append(each)
    if len(kept) >= 4 and _is_code(kept[-1].text):
        kept.pop()
    return kept


def _is_code(text: str) -> bool:
    """A performing-lab or method code (``01``, ``EZ``, ``Q3``): no flag, unit or number."""
    if _CODE_CELL.fullmatch(text):
        return True
    return bool(
        _LAB_CODE.fullmatch(text)
        and flag_of(text) is None
        and unit_key(text) not in KNOWN_UNITS
        and not text.isdigit()
    )


def _method_dropped(cells: list[Cell]) -> list[Cell] | None:
    """The cells without a trailing word column (a method: ``Photometry``, ``HPLC``)."""
    last = cells[-1].text if len(cells) >= 4 else ""
    if not _METHOD.fullmatch(last) or flag_of(last) is not None or unit_key(last) in KNOWN_UNITS:
        return None
    return cells[:-1]


def _cells_row(line: str, cells: list[Cell]) -> Row | None:
    cells = clean_cells(cells)
    result = parse_result(" ".join(c.text for c in cells[1:]))
    if result is None and (fewer := _method_dropped(cells)) is not None:
        cells = fewer
        result = parse_result(" ".join(c.text for c in cells[1:]))
    if result is not None:
        return _row(line, cells[1].start, biomarker(cells[0].text, result))
    if len(cells) >= 3 and (first := _unit_first(" ".join(c.text for c in cells[1:]))):
        return _row(line, cells[2].start, biomarker(cells[0].text, first))
    return _qualitative_row(line, cells)


def _unit_first(text: str) -> Result | None:
    """``mmol/l  133  L  136 - 145``: a unit column before the value, when the rest reads
    as a result with no unit of its own (then the unit is that column's)."""
    unit, _, rest = text.partition(" ")
    if flag_of(unit) is not None or not (
        unit_key(unit) in KNOWN_UNITS or _UNIT_CELL.fullmatch(unit)
    ):
        return None
    result = parse_result(rest)
    if result is None or result.unit or result.value is None:
        return None
    return replace(result, unit=unit)


def _qualitative_row(line: str, cells: list[Cell]) -> Row | None:
    # "Urine protein  Negative  Negative": a word result, an optional word reference
    if _qualitative_key(cells[1].text) not in QUALITATIVE or len(cells) > 4:
        return None
    reference, flag = "", None
    for each in cells[2:]:
        if flag_of(each.text) is not None and flag is None:
            flag = flag_of(each.text)
        elif _qualitative_key(each.text) in QUALITATIVE and not reference:
            reference = each.text
        else:
            return None
    return _word_row(line, cells[0].text, cells[1], reference, flag)


def _qualitative_key(text: str) -> str:
    return "-".join(text.lower().split())


def _word_row(line: str, name: str, written: Cell, reference: str, flag: Flag | str | None) -> Row:
    if isinstance(flag, Flag):
        settled = flag
    elif reference and not flag:
        same = _qualitative_key(written.text) == _qualitative_key(reference)
        settled = Flag.NORMAL if same else Flag.UNKNOWN
    else:
        settled = Flag.UNKNOWN
    found = Biomarker(name=name, value_text=written.text, reference_text=reference, flag=settled)
    return Row(found, written.start, written.start + len(written.text))


def _row(line: str, at: int, found: Biomarker) -> Row | None:
    match = VALUE_AT.match(line, at)
    if match is None:
        return None
    start, end = match.span("v")
    return Row(with_fields(found, value_text=line[start:end]), start, end)


def _token_row(line: str) -> Row | None:
    tokens = list(re.finditer(r"\S+", line))
    for index in range(1, min(len(tokens), MAX_NAME_WORDS + 1)):
        name = " ".join(token.group(0) for token in tokens[:index])
        if not is_analyte_name(name):
            continue
        result = parse_result(line[tokens[index].start() :])
        # a bare "name number" is too often prose; ask for some lab context
        if result and (result.unit or result.range or result.flag):
            return _row(line, tokens[index].start(), biomarker(name, result))
    return None


def parse_table_row(header: Header, line: str) -> Row | None:
    """A lab table row read through its header; falls back to the aligned layout."""
    cells = row_cells(header, line)
    if len(cells) != header.width or not _cells_fit(header, cells):
        # an aligned row whose empty cells collapsed: read it by content instead
        return parse_row(line)
    name, written = cell(header, cells, "name").text, cell(header, cells, "result")
    if not name or not written.text or not is_analyte_name(name):
        return None
    rng = _range_cell(cell(header, cells, "range").text)
    if rng is None and (unclaimed := _unclaimed(header, cells, "range", _is_range_cell)):
        rng = parse_range(unclaimed.text)  # "Referenz", "Intervallo": a word we do not know
    flag = flag_of(cell(header, cells, "flag").text)
    result = parse_result(written.text)  # the result cell may carry a glued unit or flag
    if result is None:
        if _qualitative_key(written.text) not in QUALITATIVE:
            return None  # a disclaimer's words under the result column are no result
        return _word_row(line, name, written, rng.text if rng else "", flag)
    found = _table_biomarker(name, result, rng, flag, header, cells)
    if earlier := cell(header, cells, "previous").text:  # an earlier result's column
        found = with_fields(found, previous=[PreviousValue(value_text=earlier)])
    return _row(line, written.start, found)


def _cells_fit(header: Header, cells: list[Cell]) -> bool:
    """The unit and range cells hold a unit and a range (not a shifted neighbour)."""
    unit, rng = cell(header, cells, "unit").text, cell(header, cells, "range").text
    if unit and (unit[0].isdigit() or parse_range(unit) is not None):
        return False
    return not rng or parse_range(rng) is not None or not any(ch.isdigit() for ch in rng)


def _table_biomarker(
    name: str,
    result: Result,
    rng: Range | None,
    flag: Flag | str | None,
    header: Header,
    cells: list[Cell],
) -> Biomarker:
    rng = rng or result.range
    return Biomarker(
        name=name,
        value=result.value,
        value_text=result.value_text,
        comparator=result.comparator,
        unit=cell(header, cells, "unit").text or result.unit or _unclaimed_unit(header, cells),
        reference_low=rng.low if rng else None,
        reference_high=rng.high if rng else None,
        reference_text=rng.text if rng else "",
        flag=final_flag(flag or result.flag, result.value, rng, result.comparator),
    )


def _unclaimed_unit(header: Header, cells: list[Cell]) -> str:
    """A header without a unit column (its word one we do not know: ``Unid.``, ``U.M.``):
    the one cell no column claims that is a unit, else none (two would be a guess)."""
    found = _unclaimed(header, cells, "unit", _is_unit_cell)
    return found.text if found else ""


def _unclaimed(
    header: Header, cells: list[Cell], role: str, fits: Callable[[str], bool]
) -> Cell | None:
    if role in header.columns:
        return None
    claimed = set(header.columns.values())
    fitting = [
        each
        for index, each in enumerate(cells)
        if index not in claimed and each.text and flag_of(each.text) is None and fits(each.text)
    ]
    return fitting[0] if len(fitting) == 1 else None


def _is_unit_cell(text: str) -> bool:
    return unit_key(text) in KNOWN_UNITS or bool(_UNIT_CELL.fullmatch(text))


def _is_range_cell(text: str) -> bool:
    return parse_range(text) is not None


def _range_cell(text: str) -> Range | None:
    if not text:
        return None
    return parse_range(text) or Range(" ".join(text.split()))


def dated_row(header: DatedHeader, line: str) -> Row | None:
    """A cumulative table's row: the value under the latest date, the others ``previous``."""
    placed = place(header, line)
    if placed is None or header.current not in placed:
        return None
    name, written = placed[0].text, placed[header.current]
    if not is_analyte_name(name):
        return None
    tail = [placed[i].text for i in sorted(placed) if i and i not in header.dates]
    result = parse_result(" ".join([written.text, *tail]))
    if result is None:
        return None
    earlier = [
        PreviousValue(value_text=placed[i].text, date=header.dates[i])
        for i in sorted(header.dates)
        if i != header.current and i in placed
    ]
    found = with_fields(biomarker(name, result), previous=earlier)
    return _row(line, written.start, found)
