"""A row read from a working line, turned into a Biomarker that quotes the page.

The extractors parse ``SourceLine.work`` (dot leaders blanked, decimal commas
made points) but a reader checks the page as printed: the value and the range
are copied back from ``SourceLine.raw`` at the same places, and the provenance
records the raw line with the value's span. A flowsheet that prints the unit in
the name column (``Hemoglobin (g/dL)  14.2``) gives the result that unit.
"""

from __future__ import annotations

import re

from msgspec.structs import replace

from saga.steps.analytes import KNOWN_UNITS, unit_key
from saga.steps.lab_rows import Row
from saga.steps.models import Biomarker, PreviousValue, Provenance
from saga.steps.page_layout import SourceLine

_BRACKET_AT_END = re.compile(r"[(\[]\s*(?P<unit>[^()\[\]]{1,15}?)\s*[)\]]\s*$")


def unit_in_name(name: str) -> str:
    """``Hemoglobin (g/dL)`` -> ``g/dL``; ``""`` when the name's last bracket is no unit."""
    match = _BRACKET_AT_END.search(name)
    if match is None:
        return ""
    unit = match.group("unit")
    return unit if "/" in unit or unit == "%" or unit_key(unit) in KNOWN_UNITS else ""


def _as_printed(earlier: PreviousValue, line: SourceLine) -> PreviousValue:
    """An earlier result's value as the page prints it (``13,1``, not the working ``13.1``)."""
    at = line.work.find(earlier.value_text)
    if at < 0:
        return earlier
    return replace(earlier, value_text=line.raw[at : at + len(earlier.value_text)])


def located(row: Row, name: str, line: SourceLine) -> Biomarker:
    """The row's result named ``name``, its value and range as written, and where."""
    found = row.biomarker
    reference = found.reference_text
    at = line.work.find(reference) if reference else -1
    return replace(
        found,
        name=" ".join(name.split()),
        value_text=line.raw[row.start : row.end],
        unit=found.unit or unit_in_name(name),
        # "4,0 - 10,0" as written, not the working copy's "4.0 - 10.0"
        reference_text=line.raw[at : at + len(reference)] if at >= 0 else reference,
        previous=[_as_printed(earlier, line) for earlier in found.previous],
        provenance=Provenance(page=line.page, line=line.raw, start=row.start, end=row.end),
    )
