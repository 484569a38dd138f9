"""Which checks vouch for an accepted value, and which values no check could vouch for.

Passing the checks (``saga.steps.checks``) means nothing contradicts a value; it
does not mean anything confirms it. A value is *vouched for* when

* ``analyte``: the analyte is in the table and the value is possible for it in
  its unit (``analytes.bounds_in``, converted between count units), or
* ``range``: the result has a reference range, read from the page with the
  document's number format, and the value is of the range's order of magnitude
  (within ``RANGE_FACTOR`` of its bounds): a value misread by a factor of 1000
  while its range was read right falls outside.

A numeric value with neither is ``unverified`` (recorded in its provenance), and
the parser asks for review. Word results (``Negative``) state no magnitude to
misread and are not marked.
"""

from __future__ import annotations

from collections.abc import Sequence

from msgspec.structs import replace

from saga.steps.analytes import bounds_in
from saga.steps.models import Biomarker

RANGE_FACTOR = 50.0
"""How far outside its range a value may lie and still be vouched for by it (CRP 250
against <5 is real; a 1000x misread is not)."""


def vouchers(found: Biomarker, page: Sequence[str] = ()) -> list[str]:
    """The checks that confirm ``found``'s value (empty: none could)."""
    if found.value is None:
        return []
    vouched = []
    if found.unit and bounds_in(found.canonical_name, found.unit) is not None:
        vouched.append("analyte")
    if _range_vouches(found, page):
        vouched.append("range")
    return vouched


def _range_vouches(found: Biomarker, page: Sequence[str]) -> bool:
    low, high, value = found.reference_low, found.reference_high, found.value
    if value is None or (low is None and high is None) or not found.reference_text:
        return False
    where = found.provenance
    if where is not None and not _printed(found.reference_text, [where.line, *page]):
        return False  # a range the page does not print vouches for nothing
    if high is not None and value > max(high, 0) * RANGE_FACTOR + 1e-9:
        return False
    return not (low is not None and low > 0 and value < low / RANGE_FACTOR)


def _printed(reference: str, lines: Sequence[str]) -> bool:
    wanted = "".join(reference.split())  # "30-100" is printed "30 - 100" too
    return any(wanted in "".join(line.split()) for line in lines)


def verified(found: Biomarker, pages: Sequence[Sequence[str]] = ()) -> Biomarker:
    """``found`` with its provenance saying what vouched for it, or that nothing did
    (``pages``: each page's lines, where a range printed apart from its value is found)."""
    where = found.provenance
    if where is None or found.value is None:
        return found
    page = pages[where.page - 1] if 0 < where.page <= len(pages) else ()
    vouched = vouchers(found, page)
    return replace(found, provenance=replace(where, vouched_by=vouched, unverified=not vouched))


def unverified_count(results: list[Biomarker]) -> int:
    """Accepted numeric values no check could vouch for (others are unverified for a reason
    of their own, reported with it: an OCR confidence, a name the table does not know)."""
    return sum(
        1
        for b in results
        if b.provenance is not None
        and b.provenance.unverified
        and not b.provenance.vouched_by
        and b.value is not None
    )
