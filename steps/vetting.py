"""What the parser does with either extractor's results before accepting them.

``vet`` takes an Extraction from the rules or the LLM extractor and the page
texts, and returns the Extraction a person can trust:

* every result is grounded: its provenance names a page the document has and a
  line on that page, and ``line[start:end]`` is the value as written there (a
  result without provenance is looked up by name and value; one that cannot be
  found is rejected as not in the document);
* canonical names and LOINC codes come from the synonym and analyte tables
  (an extractor's own LOINC is not trusted: a wrong code is a wrong value);
* the consistency checks of ``saga.steps.checks`` run, with the number format
  decided once for the document (``saga.steps.numbers``); a failure moves the
  result to ``rejected`` with its reason, a doubt adds a warning;
* what vouched for each accepted value is recorded in its provenance, or that
  nothing did (``saga.steps.verify``);
* a value whose name the table does not know is kept ``unverified``, with a
  warning, never renamed (``saga.steps.name_check``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from msgspec.structs import replace

from saga.steps.analytes import loinc_for
from saga.steps.checks import first_failure, warnings_for
from saga.steps.models import Biomarker, Extraction, Provenance, Rejected
from saga.steps.name_check import mark_unknown
from saga.steps.numbers import decide
from saga.steps.synonyms import canonical_name
from saga.steps.verify import verified

MAX_NAME_WORDS = 8


def vet(extraction: Extraction, pages: Sequence[str]) -> Extraction:
    """``extraction`` with every result grounded and checked; failures in ``rejected``."""
    fmt = decide(pages)
    lines = [[line.strip() for line in page.split("\n") if line.strip()] for page in pages]
    squeezed = [{_squeeze(line) for line in page} for page in lines]
    accepted: list[Biomarker] = []
    rejected = list(extraction.rejected)
    for found in extraction.biomarkers:
        grounded = ground(found, lines, squeezed)
        if isinstance(grounded, str):
            rejected.append(_rejected(found, grounded))
            continue
        named = annotate(grounded)
        if (reason := first_failure(named, fmt)) is not None:
            rejected.append(_rejected(named, reason))
            continue
        doubts = [*named.warnings, *(w for w in warnings_for(named) if w not in named.warnings)]
        accepted.append(mark_unknown(verified(replace(named, warnings=doubts), lines)))
    return replace(extraction, biomarkers=accepted, rejected=rejected)


def _rejected(found: Biomarker, reason: str) -> Rejected:
    return Rejected(
        name=found.name,
        value_text=found.value_text,
        unit=found.unit,
        reason=reason,
        provenance=found.provenance,
    )


def annotate(found: Biomarker) -> Biomarker:
    """The canonical name (the extractor's or the table's) and the table's LOINC code."""
    canonical = canonical_name(found.name) or found.canonical_name
    return replace(
        found, canonical_name=canonical, loinc=loinc_for(canonical, found.unit) if canonical else ""
    )


def ground(
    found: Biomarker, pages: list[list[str]], squeezed: list[set[str]] | None = None
) -> Biomarker | str:
    """``found`` with provenance that holds, or the reason none does.

    ``squeezed`` is each page's lines with runs of spaces squeezed (computed when absent).
    """
    where = found.provenance
    if where is None:
        located = _locate(found, pages)
        return located if located is not None else "its name and value do not occur together"
    if not 1 <= where.page <= len(pages):
        return f"it cites page {where.page}, which the document does not have"
    wanted = _squeeze(where.line)
    on_page = squeezed[where.page - 1] if squeezed else {_squeeze(x) for x in pages[where.page - 1]}
    if not wanted or (wanted not in on_page and not any(wanted in line for line in on_page)):
        return f"the line it cites is not on page {where.page}"
    if found.value_text and where.line[where.start : where.end] == found.value_text:
        return found
    span = _value_span(found, where.line)
    if span is None:
        return f"its value {found.value_text or found.value!r} is not in the line it cites"
    return _at(found, where.page, where.line, span)


def _locate(found: Biomarker, pages: list[list[str]]) -> Biomarker | None:
    """The first line that names the analyte (as written or by a synonym) and holds the value."""
    name, canonical = _squeeze(found.name).lower(), canonical_name(found.name)
    for number, lines in enumerate(pages, start=1):
        for line in lines:
            span = _value_span(found, line)
            if span is None:
                continue
            if name in _squeeze(line).lower() or _names(line[: span[0]], canonical):
                return _at(found, number, line, span)
    return None


def _names(text: str, canonical: str | None) -> bool:
    """True when the words before a value name ``canonical`` ("Hemoglobin A1c" for HbA1c)."""
    if canonical is None:
        return False
    words = text.replace(":", " ").split()
    return any(
        canonical_name(" ".join(words[start:])) == canonical
        for start in range(max(0, len(words) - MAX_NAME_WORDS), len(words))
    )


def _at(found: Biomarker, page: int, line: str, span: tuple[int, int]) -> Biomarker:
    start, end = span
    return replace(
        found,
        value_text=line[start:end],
        provenance=Provenance(page=page, line=line, start=start, end=end),
    )


def _value_span(found: Biomarker, line: str) -> tuple[int, int] | None:
    pattern = _written_pattern(found.value_text) if found.value_text else _number_pattern(found)
    if pattern is None:
        return None
    match = re.search(pattern, line, re.IGNORECASE)
    return match.span() if match else None


def _written_pattern(text: str) -> str:
    # "13.2" finds "13,2"; "<0.5" finds "< 0.5"
    parts = [
        r"[.,]" if ch in ".," else r"\s*" if ch.isspace() else re.escape(ch)
        for ch in " ".join(text.split())
    ]
    body = "".join(parts).replace(re.escape("<"), r"<\s*").replace(re.escape(">"), r">\s*")
    return rf"(?<![\w.,]){body}(?![\w]|[.,]\d)"


def _number_pattern(found: Biomarker) -> str | None:
    if found.value is None:
        return None
    return _written_pattern(f"{found.value:g}")


def _squeeze(text: str) -> str:
    return " ".join(text.split())
