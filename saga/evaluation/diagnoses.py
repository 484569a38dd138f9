"""Diagnoses found against those written (reported, not gated: the truth lists them for a
few documents only, and any diagnosis in a document that states none is spurious, such as
a page footer read as one)."""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from saga.evaluation.matching import fold
from saga.steps.models import Diagnosis


class DiagnosisScore(msgspec.Struct, frozen=True, kw_only=True):
    expected: int
    matched: int
    missed: list[str] = []
    spurious: list[str] = []


def score_diagnoses(expected: Sequence[str], found: Sequence[Diagnosis]) -> DiagnosisScore:
    """A found diagnosis matches a written one when either folded name contains the other."""
    names = [d.name for d in found]
    used: set[int] = set()
    missed = []
    for wanted in expected:
        key = fold(wanted)
        hit = next(
            (i for i, name in enumerate(names) if i not in used and _meets(key, fold(name))),
            None,
        )
        if hit is None:
            missed.append(wanted)
        else:
            used.add(hit)
    spurious = [name for i, name in enumerate(names) if i not in used]
    return DiagnosisScore(
        expected=len(expected), matched=len(used), missed=missed, spurious=spurious
    )


def _meets(a: str, b: str) -> bool:
    return bool(a and b) and (a in b or b in a)
