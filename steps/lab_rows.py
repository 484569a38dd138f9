"""One line of a lab report -> a Biomarker, in the layouts the rules extractor knows.

* table rows with a header (``Test | Result | Unit | Reference Range | Flag``, or the
  same columns separated by tabs / runs of spaces): cells are read by the header;
* aligned rows without a header (``Hemoglobin A1c  6.1  %  4.0-5.6  H``): the
  first cell is the name, the rest a result;
* colon rows (``Hemoglobin A1c: 6.1 % (ref 4.0-5.6)``);
* single-space rows (``Glucose 105 mg/dL 70-99 H``): the name is the shortest
  prefix after which the rest reads as a result with a unit, range or flag.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from saga.steps.lab_values import (
    QUALITATIVE,
    Range,
    biomarker,
    final_flag,
    flag_of,
    parse_range,
    parse_result,
    words,
)
from saga.steps.models import Biomarker, Flag

MAX_NAME_WORDS = 8
MAX_NAME_CHARS = 60
_CELL_SPLIT = re.compile(r"\s*\|\s*|\s{2,}")
# words that mark administrative lines ("Patient ID 12345", "Age: 45")
_NOT_ANALYTES = words(
    "patient name dob birth age mrn id date time phone fax account accession npi "
    "collected received reported specimen sex gender page zip room bed order "
    "requisition printed physician provider doctor lab laboratory address"
)
# the first role whose word appears in a header cell claims it: order matters
# ("Reference Value" is the range, "Gene Name" the gene)
_HEADER_WORDS: dict[str, tuple[str, ...]] = {
    "gene": ("gene",),
    "variant": ("variant", "mutation", "genotype", "allele"),
    "interpretation": ("interpretation", "significance", "zygosity", "classification"),
    "range": ("reference", "range", "ref", "interval", "normal"),
    "name": ("test", "analyte", "component", "name", "biomarker", "parameter", "investigation"),
    "result": ("result", "value", "results"),
    "unit": ("unit", "units"),
    "flag": ("flag", "abnormal", "h/l", "status", "indicator"),
}


@dataclass(frozen=True, slots=True)
class Header:
    """Column positions of a table header; ``kind`` is ``labs`` or ``genetics``."""

    kind: str
    columns: dict[str, int]
    width: int


def split_cells(line: str) -> list[str]:
    """Cells of a pipe table row or of a row aligned with runs of spaces."""
    return [cell.strip() for cell in _CELL_SPLIT.split(line.strip().strip("|")) if cell.strip()]


def row_cells(header: Header, line: str) -> list[str]:
    """Cells of a table row under ``header``; pipe rows keep their empty cells.

    A leading or trailing pipe is a border only when the row has more cells than
    the header: ``| Folate | 12.0`` under five columns starts with an empty cell.
    """
    if "|" not in line:
        return split_cells(line)
    cells = [cell.strip() for cell in line.strip().split("|")]
    if len(cells) > header.width and not cells[0]:
        cells.pop(0)
    if len(cells) > header.width and not cells[-1]:
        cells.pop()
    return cells + [""] * (header.width - len(cells))


def parse_header(line: str) -> Header | None:
    """A table header naming at least the test and result (or gene and variant) columns."""
    cells = split_cells(line)
    if len(cells) < 2:
        return None
    columns: dict[str, int] = {}
    for index, cell in enumerate(cells):
        words = re.split(r"[\s_]+", cell.lower())
        for role, keys in _HEADER_WORDS.items():
            if role not in columns and any(key in words or key == cell.lower() for key in keys):
                columns[role] = index
                break
    if "name" in columns and "result" in columns:
        return Header("labs", columns, len(cells))
    if "gene" in columns and "variant" in columns:
        return Header("genetics", columns, len(cells))
    return None


def is_analyte_name(name: str) -> bool:
    """A plausible analyte: letters, not too long, not an administrative label."""
    words = re.findall(r"[a-z0-9]+", name.lower())
    return (
        sum(ch.isalpha() for ch in name) >= 2
        and name[0].isalnum()
        and ":" not in name
        and len(name) <= MAX_NAME_CHARS
        and 0 < len(words) <= MAX_NAME_WORDS
        and not _NOT_ANALYTES.intersection(words)
    )


def parse_row(line: str) -> Biomarker | None:
    """A lab row in aligned, colon or single-space layout, or None."""
    if ":" in line:
        return _colon_row(line)
    cells = split_cells(line)
    if len(cells) >= 2 and is_analyte_name(cells[0]):
        found = _cells_row(cells)
        if found is not None:
            return found
    return _token_row(line)


def _colon_row(line: str) -> Biomarker | None:
    name, _, rest = line.partition(":")
    name = name.strip()
    if not is_analyte_name(name):
        return None
    result = parse_result(rest)
    return biomarker(name, result) if result else None


def _cells_row(cells: list[str]) -> Biomarker | None:
    result = parse_result(" ".join(cells[1:]))
    if result is not None:
        return biomarker(cells[0], result)
    return _qualitative_row(cells)


def _qualitative_row(cells: list[str]) -> Biomarker | None:
    # "Urine protein  Negative  Negative": a word result, an optional word reference
    if _qualitative_key(cells[1]) not in QUALITATIVE or len(cells) > 4:
        return None
    reference, flag = "", None
    for cell in cells[2:]:
        if flag_of(cell) is not None and flag is None:
            flag = flag_of(cell)
        elif _qualitative_key(cell) in QUALITATIVE and not reference:
            reference = cell
        else:
            return None
    return _word_result(cells[0], cells[1], reference, flag)


def _qualitative_key(text: str) -> str:
    return "-".join(text.lower().split())


def _word_result(name: str, written: str, reference: str, flag: Flag | str | None) -> Biomarker:
    if isinstance(flag, Flag):
        settled = flag
    elif reference and not flag:
        same = _qualitative_key(written) == _qualitative_key(reference)
        settled = Flag.NORMAL if same else Flag.UNKNOWN
    else:
        settled = Flag.UNKNOWN
    return Biomarker(name=name, value_text=written, reference_text=reference, flag=settled)


def _token_row(line: str) -> Biomarker | None:
    tokens = line.split()
    for index in range(1, min(len(tokens), MAX_NAME_WORDS + 1)):
        name = " ".join(tokens[:index])
        if not is_analyte_name(name):
            continue
        result = parse_result(" ".join(tokens[index:]))
        # a bare "name number" is too often prose; ask for some lab context
        if result and (result.unit or result.range or result.flag):
            return biomarker(name, result)
    return None


def parse_table_row(header: Header, line: str) -> Biomarker | None:
    """A lab table row read through its header; falls back to the aligned layout."""
    cells = row_cells(header, line)
    if len(cells) != header.width:
        # an aligned row whose empty cells collapsed: read it by content instead
        return parse_row(line)
    name = _cell(header, cells, "name")
    written = _cell(header, cells, "result")
    if not name or not written or not is_analyte_name(name):
        return None
    rng = _range_cell(_cell(header, cells, "range"))
    flag = flag_of(_cell(header, cells, "flag"))
    result = parse_result(written)  # the result cell may carry a glued unit or flag
    if result is None:
        return _word_result(name, written, rng.text if rng else "", flag)
    rng = rng or result.range
    return Biomarker(
        name=name,
        value=result.value,
        value_text=result.value_text,
        unit=_cell(header, cells, "unit") or result.unit,
        reference_low=rng.low if rng else None,
        reference_high=rng.high if rng else None,
        reference_text=rng.text if rng else "",
        flag=final_flag(flag or result.flag, result.value, rng),
    )


def _range_cell(text: str) -> Range | None:
    if not text:
        return None
    return parse_range(text) or Range(" ".join(text.split()))


def _cell(header: Header, cells: list[str], role: str) -> str:
    index = header.columns.get(role)
    return cells[index].strip() if index is not None and index < len(cells) else ""


def table_cells(header: Header, line: str) -> dict[str, str]:
    """A non-lab table row as role -> cell text (empty for missing columns)."""
    cells = row_cells(header, line)
    return {role: _cell(header, cells, role) for role in header.columns}
