"""Grounding: a value a model returns counts only where the cited page writes it.

``ground(result, seen, decimal_comma=...)`` looks for the result's value on the
page the model cites, in the lines the model was given of it (``seen``: page ->
lines), and returns a ``Biomarker`` whose provenance is the line that holds it and
the value's span there, or a ``Rejected`` whose reason starts with ``ungrounded:``.

* Numbers are read as the document writes them: ``13,2`` is 13.2, and ``7,500`` is
  7.5 in a document that writes decimals with commas and 7500 in one that does not
  (``page_layout.uses_decimal_comma`` decides per document, for both extractors).
* A censored value must carry the same comparator on the page: ``<0.3`` never
  grounds a plain 0.3, nor the other way round.
* A result in words (``NON-REACTIVE``, ``Negative``) must occur as words on the line,
  in any case, with spaces or hyphens between them.
* Among the lines holding the value, the one naming the analyte, or else the one most
  like the quoted line, wins; it must be close to the quote or name the analyte (on
  it or just above it). On a line that names the analyte, the value must come after
  the name, and not past another analyte's name (``crossed``: side-by-side columns).

Pure functions: no I/O, no model; table tests hold them.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from saga.steps.llm_prompt import LabResult
from saga.steps.models import Biomarker, Provenance, Rejected
from saga.steps.normalize import normalize_name

QUOTE_SIMILARITY = 85
"""rapidfuzz ratio (0-100) above which a line is the one the model quoted."""
NAME_SIMILARITY = 90
"""rapidfuzz partial ratio above which a line names the analyte."""
NAME_LOOKBACK = 2
"""A name may stand this many lines above its value (wrapped names, stacked layouts)."""

_NUMERAL = re.compile(r"(?<![\w.,^])\d+(?:[.,]\d+)*(?!\d)(?!-[A-Za-z])")
_COMPARATOR = re.compile(r"(<=|>=|=<|=>|≤|≥|<|>)\s?$")
_CANONICAL_CMP = {"≤": "<=", "≥": ">=", "=<": "<=", "=>": ">="}
_THOUSANDS = {",": re.compile(r"\d{1,3}(?:,\d{3})+"), ".": re.compile(r"\d{1,3}(?:\.\d{3})+")}
_RANGE_AFTER = re.compile(r"\s*[-\u2013\u2014]\s*\d")
_RANGE_BEFORE = re.compile(r"\d\s*[-\u2013\u2014]\s*$")
_WORD = re.compile(r"\w+|[^\w\s]")
_NAME_CHARS = 60


@dataclass(frozen=True, slots=True)
class Found:
    """A value found on a line: the span of it as written (comparator included)."""

    start: int
    end: int


def read_number(numeral: str, *, decimal_comma: bool) -> float | None:
    """The number a numeral states in this document, or None (a date, a bad grouping)."""
    decimal, grouping = (",", ".") if decimal_comma else (".", ",")
    if decimal in numeral and grouping in numeral:  # 1,250.5 or 1.250,5
        whole, _, fraction = numeral.rpartition(decimal)
        if not _THOUSANDS[grouping].fullmatch(whole) or not fraction.isdigit():
            return None
        return float(whole.replace(grouping, "") + "." + fraction)
    mark = "," if "," in numeral else "." if "." in numeral else ""
    if not mark:
        return float(numeral)
    if numeral.count(mark) > 1:  # 1,250,000: groups of thousands, or a date
        return float(numeral.replace(mark, "")) if _THOUSANDS[mark].fullmatch(numeral) else None
    whole, fraction = numeral.split(mark)
    if mark == grouping and whole != "0" and _THOUSANDS[mark].fullmatch(numeral):
        return float(whole + fraction)  # 7,500 where decimals are written 7.5
    return float(f"{whole}.{fraction}")


def comparator(text: str) -> str:
    """``≤`` and ``=<`` as ``<=``; ``""`` stays ``""``."""
    text = text.strip()
    return _CANONICAL_CMP.get(text, text)


def find_number(line: str, number: float, cmp: str, *, decimal_comma: bool) -> list[Found]:
    """Spans of ``line`` that state ``number`` with comparator ``cmp`` (``""``: none)."""
    found = []
    for match in _NUMERAL.finditer(line):
        value = read_number(match.group(0), decimal_comma=decimal_comma)
        if value is None:
            continue
        start = match.start()
        if start and line[start - 1] in "-\u2212" and (start < 2 or not line[start - 2].isalnum()):
            start, value = start - 1, -value  # a sign, not a range's dash
        before = _COMPARATOR.search(line, 0, start)
        written = comparator(before.group(1)) if before else ""
        if written == cmp and math.isclose(value, number, rel_tol=1e-9, abs_tol=1e-12):
            found.append(Found(before.start() if before else start, match.end()))
    return found


def find_words(line: str, text: str) -> list[Found]:
    """Spans of ``line`` where the words of ``text`` stand, any case, spaced or hyphenated."""
    words = _WORD.findall(text)
    if not words:
        return []
    pattern = r"(?<!\w)" + r"[\s\-]*".join(re.escape(w) for w in words) + r"(?!\w)"
    return [Found(m.start(), m.end()) for m in re.finditer(pattern, line, re.IGNORECASE)]


def ground(
    result: LabResult, seen: Mapping[int, Sequence[str]], *, decimal_comma: bool
) -> Biomarker | Rejected:
    """The result as a Biomarker with provenance, or Rejected as ungrounded."""
    lines = seen.get(result.page)
    if lines is None:
        return _rejected(result, f"the answer cites page {result.page}, which it was not given")
    wanted = _wanted(result, decimal_comma)
    if wanted is None:
        return _rejected(result, "the answer gives no value")
    shown, number, cmp = wanted
    hits = [
        (i, spans) for i, line in enumerate(lines) if (spans := _find(line, wanted, decimal_comma))
    ]
    if not hits:
        return _rejected(result, f"{shown} does not occur on page {result.page}")
    placed = [(i, after) for i, spans in hits if (after := _after_name(result, lines[i], spans))]
    if not placed:
        name = result.name[:_NAME_CHARS]
        return _rejected(result, f"{shown} stands before {name} on page {result.page}, not after")
    index, spans = max(placed, key=lambda hit: _score(result, lines, hit[0]))
    if not _vouched(result, lines, index):
        name = result.name[:_NAME_CHARS]
        return _rejected(
            result, f"{shown} occurs on page {result.page} but not on a line with {name}"
        )
    line = lines[index]
    span = _result_span(line, spans)
    return Biomarker(
        name=result.name,
        value=number,
        value_text=line[span.start : span.end],
        comparator=cmp,
        unit=result.unit,
        reference_low=result.reference_low,
        reference_high=result.reference_high,
        reference_text=result.reference_text,
        flag=result.flag,
        provenance=Provenance(page=result.page, line=line, start=span.start, end=span.end),
    )


_Wanted = tuple[str, float | None, str]
"""How the value is shown in a reason, the number (None: words), the comparator."""


def _wanted(result: LabResult, decimal_comma: bool) -> _Wanted | None:
    text = result.value_text.strip()
    cmp = comparator(result.comparator)
    if result.value is not None:
        if not cmp and (lead := re.match(r"(<=|>=|=<|=>|≤|≥|<|>)", text)):
            cmp = comparator(lead.group(1))
        return f"{cmp}{result.value:g}", result.value, cmp
    numeral = re.fullmatch(r"(<=|>=|=<|=>|≤|≥|<|>)?\s?(\d+(?:[.,]\d+)*)", text)
    if numeral is not None:
        number = read_number(numeral.group(2), decimal_comma=decimal_comma)
        if number is not None:
            return text, number, comparator(numeral.group(1) or "")
    return (text[:_NAME_CHARS], None, "") if text else None


def _find(line: str, wanted: _Wanted, decimal_comma: bool) -> list[Found]:
    shown, number, cmp = wanted
    if number is None:
        return find_words(line, shown)
    return find_number(line, number, cmp, decimal_comma=decimal_comma)


def _similar(a: str, b: str) -> float:
    from rapidfuzz import fuzz

    return float(fuzz.ratio(" ".join(a.split()).casefold(), " ".join(b.split()).casefold()))


def _names(result: LabResult, text: str) -> bool:
    from rapidfuzz import fuzz

    name, folded = normalize_name(result.name), normalize_name(text)
    return bool(name) and (name in folded or fuzz.partial_ratio(name, folded) >= NAME_SIMILARITY)


def _score(result: LabResult, lines: Sequence[str], index: int) -> tuple[bool, float, int]:
    """Lines naming the analyte first, then likeness to the quote, then the earliest."""
    return (_names(result, lines[index]), _similar(result.line, lines[index]), -index)


def _vouched(result: LabResult, lines: Sequence[str], index: int) -> bool:
    """The line is the one quoted, or the analyte is named on it or just above it."""
    if result.line and _similar(result.line, lines[index]) >= QUOTE_SIMILARITY:
        return True
    above = lines[max(0, index - NAME_LOOKBACK) : index + 1]
    return any(_names(result, line) for line in above)


def name_at(name: str, line: str) -> int:
    """Where the analyte's name, as the model copied it, starts on the line; -1 if absent."""
    return line.casefold().find(name.casefold()) if name.strip() else -1


def _after_name(result: LabResult, line: str, spans: list[Found]) -> list[Found]:
    """A line that names the analyte holds its value after the name (tables read left to
    right): a span before the name belongs to another analyte."""
    at = name_at(result.name, line)
    if at < 0:
        return spans
    return [span for span in spans if span.start >= at + len(result.name.strip())]


def crossed(results: Sequence[Biomarker]) -> set[int]:
    """Indexes of results whose value lies past another result's name on the same line:
    in side-by-side columns (``Sodium 140 mmol/L   Potassium 4.2 mmol/L``) a value
    belongs to the nearest name before it."""
    bad = set()
    by_line: dict[tuple[int, str], list[int]] = {}
    for i, result in enumerate(results):
        if result.provenance is not None:
            by_line.setdefault((result.provenance.page, result.provenance.line), []).append(i)
    for (_, line), members in by_line.items():
        starts = {i: name_at(results[i].name, line) for i in members}
        for i in members:
            own, value = starts[i], results[i].provenance.start  # type: ignore[union-attr]
            if own >= 0 and any(own < starts[j] < value for j in members if j != i):
                bad.add(i)
    return bad


def _result_span(line: str, spans: list[Found]) -> Found:
    """The first span that is not a bound of a range (``12.0 - 15.5``), else the first."""
    for span in spans:
        if not _RANGE_AFTER.match(line, span.end) and not _RANGE_BEFORE.search(line, 0, span.start):
            return span
    return spans[0]


def _rejected(result: LabResult, why: str) -> Rejected:
    return Rejected(
        name=result.name,
        value_text=result.value_text or ("" if result.value is None else f"{result.value:g}"),
        unit=result.unit,
        reason=f"ungrounded: {why}",
    )


def cross_rejected(result: Biomarker) -> Rejected:
    """A result ``crossed`` found standing in another analyte's column."""
    page = result.provenance.page if result.provenance else 0
    return Rejected(
        name=result.name,
        value_text=result.value_text,
        unit=result.unit,
        reason=f"ungrounded: {result.value_text} on page {page} stands past another "
        "analyte's name on its line",
        provenance=result.provenance,
    )
