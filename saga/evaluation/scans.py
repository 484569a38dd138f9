"""The scanned documents of a corpus, scored apart: what OCR read, by how it was scanned.

Recall here counts every expected row (every page is a picture), and a wrong
value only counts against OCR when its document was not flagged for review:
a flagged document is one a person checks.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from saga.evaluation.score import DocumentScore, Gate

SCAN_RECALL = 0.90
"""Exact recall asked of grey scans at 200 dpi and more (``scan-*``)."""
FAX_RECALL = 0.75
"""Exact recall asked of faxes (``fax-200x200``, ``fax-200x100``, 1-bit)."""


class ScanClass(msgspec.Struct, frozen=True, kw_only=True):
    kind: str
    documents: int
    expected: int
    exact: int
    wrong: int
    wrong_unflagged: int
    flagged: int
    pages: int
    cpu_s: float

    @property
    def recall(self) -> float:
        return self.exact / self.expected if self.expected else 1.0

    @property
    def cpu_per_page(self) -> float:
        return self.cpu_s / self.pages if self.pages else 0.0


def scan_classes(scores: Sequence[DocumentScore]) -> list[ScanClass]:
    """One line per kind of scan, in the order first met."""
    kinds: dict[str, list[DocumentScore]] = {}
    for score in scores:
        if score.scan:
            kinds.setdefault(score.scan, []).append(score)
    return [_class(kind, members) for kind, members in kinds.items()]


def _class(kind: str, members: Sequence[DocumentScore]) -> ScanClass:
    return ScanClass(
        kind=kind,
        documents=len(members),
        expected=sum(s.expected for s in members),
        exact=sum(s.exact for s in members),
        wrong=sum(s.wrong for s in members),
        wrong_unflagged=sum(s.wrong for s in members if not s.flagged),
        flagged=sum(1 for s in members if s.flagged),
        pages=sum(s.ocr_pages for s in members),
        cpu_s=sum(s.ocr_cpu_s for s in members),
    )


def _pooled(classes: Sequence[ScanClass], prefix: str) -> tuple[int, int]:
    chosen = [c for c in classes if c.kind.startswith(prefix)]
    return sum(c.exact for c in chosen), sum(c.expected for c in chosen)


def scan_gates(
    scores: Sequence[DocumentScore], classes: Sequence[ScanClass], strays: Sequence[str] = ()
) -> list[Gate]:
    """No unflagged wrong value; no unmatched value trusted (``strays``: the layout of each
    spurious value accepted without ``unverified``, as a misread name would be); recall at
    scan and at fax resolution."""
    if not classes:
        return []
    unflagged = sum(c.wrong_unflagged for c in classes)
    gates = [
        Gate(
            name="scans: wrong unflagged",
            ok=unflagged == 0,
            actual=str(unflagged),
            limit="0",
            detail=", ".join(s.layout for s in scores if s.scan and s.wrong and not s.flagged),
        ),
        Gate(
            name="scans: strays trusted",
            ok=not strays,
            actual=str(len(strays)),
            limit="0",
            detail=", ".join(sorted(set(strays))),
        ),
    ]
    for prefix, floor, label in (("scan-", SCAN_RECALL, "scan"), ("fax-", FAX_RECALL, "fax")):
        exact, expected = _pooled(classes, prefix)
        if expected:
            recall = exact / expected
            gates.append(
                Gate(
                    name=f"scans: {label} recall",
                    ok=recall >= floor,
                    actual=f"{recall:.1%}",
                    limit=f">= {floor:.0%}",
                    detail=f"{exact}/{expected}",
                )
            )
    return gates
