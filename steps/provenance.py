"""A row read from a working line, turned into a Biomarker that quotes the page.

The extractors parse ``SourceLine.work`` (dot leaders blanked, decimal commas
made points) but a reader checks the page as printed: the value and the range
are copied back from ``SourceLine.raw`` at the same places, and the provenance
records the raw line with the value's span.
"""

from __future__ import annotations

from msgspec.structs import replace

from saga.steps.lab_rows import Row
from saga.steps.models import Biomarker, Provenance
from saga.steps.page_layout import SourceLine


def located(row: Row, name: str, line: SourceLine) -> Biomarker:
    """The row's result named ``name``, its value and range as written, and where."""
    found = row.biomarker
    reference = found.reference_text
    at = line.work.find(reference) if reference else -1
    return replace(
        found,
        name=" ".join(name.split()),
        value_text=line.raw[row.start : row.end],
        # "4,0 - 10,0" as written, not the working copy's "4.0 - 10.0"
        reference_text=line.raw[at : at + len(reference)] if at >= 0 else reference,
        provenance=Provenance(page=line.page, line=line.raw, start=row.start, end=row.end),
    )
