"""Results written inside sentences: ``C-reactive protein 48 mg/L (ref <5)``, ``CRP was 48 mg/L``.

A sentence gives a result only when all of these hold, because prose is full of
numbers (``Follow up in 2 weeks.``): the words before the number name an analyte
the synonym table knows; the number is followed by a unit, and that unit is one
the analyte is reported in when the analyte's units are known. A reference in
brackets after the unit (``(ref <5)``, ``(normal 70-99)``) is read too.

Two more forms:

* a list of results without units (``Admission labs: Na 134, K 3.4, Cr 2.1``):
  each number follows a known analyte name directly and ends a list item; a
  lone item is not a list and gives nothing;
* a threshold is not a result: ``HbA1c of 48 mmol/mol or above is consistent
  with diabetes`` and ``above 40 mg/dL`` give nothing.
"""

from __future__ import annotations

import re

from saga.steps.analytes import limits_for, unit_key
from saga.steps.lab_rows import Row
from saga.steps.lab_values import CMP, NUM, Result, biomarker, parse_range, parse_value, words
from saga.steps.synonyms import canonical_name

MAX_NAME_WORDS = 5
_MEASURE = re.compile(
    rf"(?<![\w.,])(?P<v>(?:(?:{CMP})\s*)?(?:{NUM}))\s*"
    r"(?P<unit>%|(?:x\s?)?10\^?\d+/[A-Za-z\u00b5\u03bc]+"
    r"|[A-Za-z\u00b5\u03bc]+/[A-Za-z\u00b5\u03bc0-9.]*[A-Za-z\u00b5\u03bc0-9]|[A-Za-z\u00b5\u03bc]+)"
    r"(?=[\s.,;)]|$)"
    r"(?:\s*[(\[]\s*(?:ref(?:erence)?|normal)(?:\s+range)?\s*:?\s*(?P<ref>[^)\]]{1,30})[)\]])?",
    re.IGNORECASE,
)
_WORD = re.compile(r"[A-Za-z0-9\u00c0-\u024f][\w\u00c0-\u024f()/-]*")
_LISTED = re.compile(rf"(?<![\w.,<>])(?P<v>{NUM})(?=\s*[,;]|\.(?:\s|$)|\s*$)")
_THRESHOLD_AFTER = re.compile(
    r"\s*(?:or|and)\s+(?:above|below|over|under|more|less|higher|lower|greater)\b", re.IGNORECASE
)
_THRESHOLD_BEFORE = re.compile(
    r"\b(?:above|below|over|under|than|exceeds?|exceeding|least|most|target|goal)\s*$",
    re.IGNORECASE,
)
# words between a name and its value: "CRP was 48 mg/L", "glucose level of 105 mg/dL"
_LINKS = words("was were is are of at measured level levels came back to = : value")


def narrative_rows(line: str) -> list[Row]:
    """The results stated in prose, each with the span of its value, in text order."""
    rows = _measured(line) + _listed(line)
    return sorted(rows, key=lambda row: row.start)


def _measured(line: str) -> list[Row]:
    rows = []
    for match in _MEASURE.finditer(line):
        name = _analyte_before(line[: match.start()])
        if name is None or not _unit_fits(name, match.group("unit")):
            continue
        if _THRESHOLD_AFTER.match(line, match.end()) or _THRESHOLD_BEFORE.search(
            line[: match.start()]
        ):
            continue
        head = parse_value(" ".join(match.group("v").split()))
        if head is None:
            continue
        value, comparator, _, _ = head
        ref = match.group("ref")
        result = Result(
            value=value,
            value_text=match.group("v"),
            unit=match.group("unit"),
            range=parse_range(ref) if ref else None,
            comparator=comparator,
        )
        rows.append(Row(biomarker(name, result), *match.span("v")))
    return rows


def _listed(line: str) -> list[Row]:
    rows = []
    for match in _LISTED.finditer(line):
        name = _analyte_before(line[: match.start()], links=False)
        head = parse_value(match.group("v"))
        if name is None or head is None:
            continue
        result = Result(value=head[0], value_text=match.group("v"))
        rows.append(Row(biomarker(name, result), *match.span("v")))
    return rows if len(rows) >= 2 else []


def _analyte_before(text: str, *, links: bool = True) -> str | None:
    tokens = list(_WORD.finditer(text))
    between = text[tokens[-1].end() :].strip() if tokens else ""
    if between and (not links or between not in (":", "=")):
        return None  # "48 mg/L (ref <5)": a bracket or number between name and value
    while links and tokens and tokens[-1].group(0).lower() in _LINKS:
        tokens.pop()
    for size in range(min(MAX_NAME_WORDS, len(tokens)), 0, -1):
        candidate = text[tokens[-size].start() : tokens[-1].end()]
        if canonical_name(candidate) is not None:
            return candidate
    return None


def _unit_fits(name: str, unit: str) -> bool:
    canonical = canonical_name(name)
    limits = limits_for(canonical) if canonical else None
    if limits is not None:
        return unit_key(unit) in limits
    return "/" in unit or unit == "%"
