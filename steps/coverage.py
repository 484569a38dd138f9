"""How much of a document an extraction explains, and when a person should review it.

A *result-like* line holds a label and a number with a unit (``140 mmol/L``,
``6.1 %``), a flag (``212 HIGH``, ``118L``) or a reference range (``135-145``,
``< 5.7``, ``Less than 200``, ``70 to 99``), after dates, times, page furniture,
commentary and reference categories (``High: >=240``) are set aside. The count
asks nothing of the extractor's rules: a line no rule read still counts. A line
is *explained* when an accepted or a rejected result cites it as its provenance
(or as part of its note). Coverage is explained over
result-like lines; it stands in for recall, which needs a ground truth that
production does not have.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from saga.steps.categories import is_category_line
from saga.steps.checks import NO_UNIT_WARNING
from saga.steps.lab_values import CMP, NUM
from saga.steps.models import Coverage, Extraction, Provenance
from saga.steps.name_check import has_unknown_name
from saga.steps.page_layout import document_lines
from saga.steps.synonyms import canonical_name
from saga.steps.verify import unverified_count

NOTE_SEPARATOR = " | "
"""Between the lines of a result's ``note``."""
MAX_UNEXPLAINED = 10
"""How many unexplained lines the output keeps as examples (it is a bounded checkpoint)."""

_MONTH = r"(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*"
# dates, times, phone numbers and ids: numbers that are no results
_NOT_RESULTS = re.compile(
    rf"\b\d+(?:-\d+){{2,}}\b|\b\d{{1,4}}[./-]\d{{1,2}}[./-]\d{{1,4}}\b"
    rf"|\b\d{{1,2}}:\d{{2}}(?::\d{{2}})?\b|\b\d{{3,}}-\d{{3,}}\b"
    rf"|\b\d{{1,2}}[/ -]{_MONTH}[/ -]\d{{2,4}}\b"
    r"|\b(?:acct|account|mrn|id|no|nr|n[\u00ba\u00b0]|dob|accession|specimen|order|requisition"
    r"|phone|tel|fax|ph|historia|pedido|lab\s+no)\.?\s*[:#]?\s*[\w./-]*\d[\w./-]*",
    re.IGNORECASE,
)
# "Reference: 0-99 mg/dL" states a range, not a result
_REFERENCE_ONLY = re.compile(
    rf"(?:ref(?:erence)?|normal)(?:\s+(?:range|interval))?\s*:?\s*(?:{CMP})?\s*(?:{NUM})"
    rf"(?:\s*(?:-|\u2013|\u2014)\s*(?:{NUM}))?(?:\s*\S*[/%]\S*)?",
    re.IGNORECASE,
)
# commentary: "Interpretation: HbA1c 6.5% and above ...", "48 mmol/mol or above"
_COMMENTARY = re.compile(
    r"^(?:notes?|comments?|interpretation|disclaimer)\s*:|\b(?:or|and)\s+(?:above|below|more|less"
    r"|higher|lower|greater)\b",
    re.IGNORECASE,
)
_UNIT = (
    r"%|[A-Za-z\u00b5\u03bc]*/[A-Za-z\u00b5\u03bc0-9.^\u00b2\u00b3]+"
    r"|(?:x\s?)?10\s?(?:\^|\*|e|E)?[\d\u00b3\u2076\u2079\u00b9\u00b2]+\s?/\s?\S+"
    r"|fl|pg|mmol|mEq|IU|U|g|mg|ng|pmol|nmol|umol|\u00b5mol|mm|sec|s|ratio|index"
)
_UNIT_AFTER_NUMBER = re.compile(
    rf"(?<![\w.])(?:{NUM})\s*(?:{_UNIT})(?![A-Za-z])|(?<![\w.,])(?:{NUM})[.,]\d+\s*(?:{_UNIT})",
    re.IGNORECASE,
)
# a number and a flag word, or a flag glued to it ("212  HIGH", "118L", "11.8H", "7.1 *")
_FLAGGED_NUMBER = re.compile(
    r"(?<![\w.])(?:\d+(?:[.,]\d+)*)\s*(?:HH|LL|H|L|A|\*|!|\u2191|\u2193|\u25b2|\u25bc)(?!\w)"
    r"|(?<![\w.])(?:\d+(?:[.,]\d+)*)\s+(?i:high|low|abnormal|critical|abn|crit|panic)\b"
)
_RANGE = re.compile(
    rf"(?<![\w.])(?:{NUM})\s*(?:-|\u2013|\u2014|to|bis|a)\s*(?:{NUM})(?![\w.])"
    rf"|(?:{CMP})\s*(?:{NUM})"
    rf"|\b(?:less|greater|more|lower|higher)\s+than\s+(?:or\s+equal\s+to\s+)?(?:{NUM})"
    rf"|\b(?:up\s+to|below|above|under)\s+(?:{NUM})",
    re.IGNORECASE,
)
_LABEL = re.compile(r"[^\W\d_]{2,}")
_NAME_THEN_NUMBER = re.compile(
    r"\s*(?P<name>[^\W\d_][^\d:]{0,40}?)\s*:?\s+[<>]?\d+(?:[.,]\d+)?(?:\s|$)"
)


def is_result_like(line: str) -> bool:
    """A labelled line with a number and a unit, a flag or a range (or a name the synonym
    table knows and a number): a result, whatever the layout, unless it is a date or id
    line, a reference-only line, commentary, or a reference category (``High: >=240``,
    ``saga.steps.categories``).

    Independent of the extractor's rules: it asks only what any result line shows.
    """
    if _COMMENTARY.search(line) or is_category_line(line) or not _LABEL.search(line):
        return False
    text = _REFERENCE_ONLY.sub(" ", _NOT_RESULTS.sub(" ", line))
    return bool(
        _UNIT_AFTER_NUMBER.search(text)
        or _FLAGGED_NUMBER.search(text)
        or _RANGE.search(text)
        or _known_name_then_number(text)
    )


def _known_name_then_number(text: str) -> bool:
    """``INR  1.1``, ``pH 7.35``: a name the synonym table knows, then a bare number."""
    match = _NAME_THEN_NUMBER.match(text)
    return match is not None and canonical_name(match.group("name")) is not None


def measure(pages: Sequence[str], extraction: Extraction) -> Coverage:
    """Result-like lines of ``pages`` and how many the extraction's results cite."""
    cited: dict[int, list[str]] = {}
    sources = [b.provenance for b in extraction.biomarkers]
    sources += [r.provenance for r in extraction.rejected]
    for where in sources:
        if where is not None:
            cited.setdefault(where.page, []).append(_squeeze(where.line))
    for found in extraction.biomarkers:  # lines attached to a result as its note
        if found.note and found.provenance is not None:
            notes = cited.setdefault(found.provenance.page, [])
            notes += [_squeeze(part) for part in found.note.split(NOTE_SEPARATOR)]
    candidates = explained = 0
    unexplained: list[Provenance] = []
    for lines in document_lines(pages):
        for line in lines:
            if not is_result_like(line.work):
                continue
            candidates += 1
            text = _squeeze(line.raw)
            if any(quoted and quoted in text for quoted in cited.get(line.page, ())):
                explained += 1
            elif len(unexplained) < MAX_UNEXPLAINED:
                unexplained.append(Provenance(page=line.page, line=line.raw))
    return Coverage(candidate_lines=candidates, explained_lines=explained, unexplained=unexplained)


def review_reason(
    extraction: Extraction, textless_pages: Sequence[int], min_coverage: float
) -> str:
    """One sentence saying why a person should check this extraction; ``""`` when none."""
    reasons = []
    found = extraction.biomarkers or extraction.diagnoses
    if not (found or extraction.procedures or extraction.genetics):
        reasons.append("nothing was extracted")
    coverage = extraction.coverage
    if coverage.candidate_lines and coverage.ratio < min_coverage:
        reasons.append(
            f"coverage {_percent(coverage.ratio)} ({coverage.explained_lines} of "
            f"{coverage.candidate_lines} result-like lines) under {_percent(min_coverage)}"
        )
    if rejected := len(extraction.rejected):
        reasons.append(f"{rejected} value{'s' if rejected > 1 else ''} rejected by the checks")
    if unitless := sum(NO_UNIT_WARNING in found.warnings for found in extraction.biomarkers):
        # "Creatinine 2.1": mg/dL or umol/L? a person has to say
        reasons.append(f"{unitless} value{'s' if unitless > 1 else ''} without a unit")
    if unverified := unverified_count(extraction.biomarkers):
        # a value of an unknown analyte with no range: nothing confirms its magnitude
        reasons.append(
            f"{unverified} value{'s' if unverified > 1 else ''} unverified"
            " (no check could vouch for them)"
        )
    if unknown := [b for b in extraction.biomarkers if has_unknown_name(b)]:
        # a lab's own analyte, or a known one misread: kept, never renamed; a person says which
        count = len(unknown)
        pages = sorted({b.provenance.page for b in unknown if b.provenance is not None})
        where = f" on {_pages(pages)}" if pages else ""
        reasons.append(
            f"{count} value{'s' if count > 1 else ''}{where} with a name the analyte table"
            " does not know, kept unverified"
        )
    if textless_pages:
        reasons.append(f"{_pages(textless_pages)} had no text")
    return "; ".join(reasons)


def _pages(numbers: Sequence[int]) -> str:
    shown = ", ".join(str(n) for n in numbers[:10])
    more = ", ..." if len(numbers) > 10 else ""
    return f"page{'s' if len(numbers) > 1 else ''} {shown}{more}"


def _percent(ratio: float) -> str:
    return f"{ratio * 100:.0f}%"


def _squeeze(text: str) -> str:
    return " ".join(text.split())
