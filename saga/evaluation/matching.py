"""Pair extracted biomarkers with expected results.

The rules, in order:

1. An extracted result and an expected row *concern the same analyte* when the
   extracted name or ``canonical_name`` equals the expected name or analyte,
   compared without case, diacritics or extra whitespace.
2. They *agree* when the value and the unit agree: numbers equal (and the
   comparator, ``<`` ``>`` ``<=`` ``>=``, taken from ``comparator`` or from the
   start of ``value_text``); a qualitative result's words equal without case,
   spaces or hyphens (``NON-REACTIVE`` = ``Non reactive``); units equal after
   folding case, spaces and the micro sign (``µ``, ``μ``, ``mc`` -> ``u``). A
   censored result whose ``value`` is None agrees when its ``value_text`` reads
   the same as the expected one.
3. Pairs that agree are taken first (**exact**), preferring the same page and
   then document order; among what is left, pairs that concern the same analyte
   are **wrong** (the analyte is right, the value or unit is not). A leftover
   result whose name is an expected name followed by a number (a row read with
   its value inside the name) is also **wrong**, not spurious.
4. Expected rows left over are **missed**; extracted results left over are
   **spurious**.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum

from saga.evaluation.truth import ExpectedResult
from saga.steps.models import Biomarker

_COMPARATORS = {"<": "<", ">": ">", "<=": "<=", ">=": ">=", "≤": "<=", "≥": ">="}
_LEADING_COMPARATOR = re.compile(r"^\s*(<=|>=|<|>|≤|≥)")
_MICRO = re.compile(r"(?<![a-z])mc(?=[a-z])")


class Outcome(StrEnum):
    EXACT = "exact"
    WRONG = "wrong"
    MISSED = "missed"
    SPURIOUS = "spurious"


@dataclass(frozen=True)
class Pair:
    """One line of the verdict: an expected row, an extracted result, or both."""

    outcome: Outcome
    expected: ExpectedResult | None = None
    found: Biomarker | None = None


def fold(text: str) -> str:
    """Case, diacritics and whitespace folded: the comparable form of a name."""
    decomposed = unicodedata.normalize("NFKD", text)
    bare = "".join(c for c in decomposed if not unicodedata.combining(c))
    return " ".join(bare.casefold().split())


def fold_unit(unit: str) -> str:
    """Case, spaces, the micro prefix and the power sign folded (``µg/L`` = ``ug/l`` =
    ``mcg/L``; ``10*3/uL``, UCUM's spelling, = ``10^3/uL``)."""
    text = unicodedata.normalize("NFKC", unit).replace("μ", "u").casefold()
    text = re.sub(r"10\*(?=\d)", "10^", text)
    return _MICRO.sub("u", "".join(text.split()))


def fold_words(text: str) -> str:
    """A word result without case, spaces or punctuation (``NON-REACTIVE`` = ``Non reactive``)."""
    return re.sub(r"[^0-9a-z+]", "", fold(text))


def comparator_of(found: Biomarker) -> str:
    """The comparator the extractor stated, or the one its ``value_text`` starts with."""
    if found.comparator:
        return _COMPARATORS.get(found.comparator, found.comparator)
    m = _LEADING_COMPARATOR.match(found.value_text)
    return _COMPARATORS[m.group(1)] if m else ""


def same_analyte(expected: ExpectedResult, found: Biomarker) -> bool:
    """Rule 1: names or canonical names meet."""
    wanted = {fold(expected.name), fold(expected.analyte)}
    got = {fold(found.name), fold(found.canonical_name)} - {""}
    return bool(wanted & got)


def same_value(expected: ExpectedResult, found: Biomarker) -> bool:
    """Rule 2, the value half."""
    if expected.value is None:
        return found.value is None and fold_words(found.value_text) == fold_words(
            expected.value_text
        )
    if found.value is None:
        # a censored result not yet turned into a number: its text must read the same
        return bool(expected.comparator) and _squeeze(found.value_text) == _squeeze(
            expected.value_text
        )
    if comparator_of(found) != _COMPARATORS.get(expected.comparator, expected.comparator):
        return False
    return math.isclose(found.value, expected.value, rel_tol=1e-9, abs_tol=1e-12)


def agrees(expected: ExpectedResult, found: Biomarker) -> bool:
    """Rule 2: value and unit agree."""
    return same_value(expected, found) and fold_unit(expected.unit) == fold_unit(found.unit)


def value_in_name(expected: ExpectedResult, found: Biomarker) -> bool:
    """Rule 3's last case: ``"Hemoglobin 11.2 g/dL 12.0 -"`` is a Hemoglobin row misread."""
    got = fold(found.name)
    for name in {fold(expected.name), fold(expected.analyte)}:
        rest = got.removeprefix(name)
        if rest != got and re.match(r"\s*[-+<>]?\d", rest):
            return True
    return False


def match(expected: Sequence[ExpectedResult], found: Sequence[Biomarker]) -> list[Pair]:
    """Every expected row and every extracted result, each in exactly one pair."""
    free_e = set(range(len(expected)))
    free_f = set(range(len(found)))
    pairs: list[Pair] = []
    tiers: tuple[tuple[Outcome, Callable[[ExpectedResult, Biomarker], bool]], ...] = (
        (Outcome.EXACT, lambda e, f: same_analyte(e, f) and agrees(e, f)),
        (Outcome.WRONG, same_analyte),
        (Outcome.WRONG, value_in_name),
    )
    for outcome, test in tiers:
        candidates = [
            (_distance(expected[i], i, found[j], j), i, j)
            for i in sorted(free_e)
            for j in sorted(free_f)
            if test(expected[i], found[j])
        ]
        for _, i, j in sorted(candidates):
            if i in free_e and j in free_f:
                free_e.discard(i)
                free_f.discard(j)
                pairs.append(Pair(outcome, expected[i], found[j]))
    pairs += [Pair(Outcome.MISSED, expected=expected[i]) for i in sorted(free_e)]
    pairs += [Pair(Outcome.SPURIOUS, found=found[j]) for j in sorted(free_f)]
    return pairs


def _distance(expected: ExpectedResult, i: int, found: Biomarker, j: int) -> tuple[int, int]:
    """Same page first, then nearest in document order."""
    page = found.provenance.page if found.provenance else expected.page
    return (0 if page == expected.page else 1, abs(i - j))


def _squeeze(text: str) -> str:
    return "".join(text.split()).replace("≤", "<=").replace("≥", ">=")
