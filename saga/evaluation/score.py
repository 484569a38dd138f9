"""Figures per document and over a corpus, and the gates they must pass.

Per document: expected rows, exact, wrong, missed, spurious, recall
(exact / expected), coverage as the parser measured it, and whether the parser
asked for review. Over the corpus, recall counts only rows a text extractor can
see: rows on image-only pages are what review is for, so they are left out of
the total recall (but not out of a document's own recall, which decides whether
it had to be flagged).
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from saga.evaluation.diagnoses import DiagnosisScore
from saga.evaluation.matching import Outcome, Pair
from saga.evaluation.truth import ExpectedDocument, ExpectedResult
from saga.steps.models import Biomarker

REVIEW_BELOW_RECALL = 0.9
"""A document whose recall is under this must be flagged for review."""


class Miss(msgspec.Struct, frozen=True, kw_only=True):
    """A row a person should look at: what was expected and what was found."""

    page: int
    expected: str = ""
    found: str = ""


class DocumentScore(msgspec.Struct, frozen=True, kw_only=True):
    layout: str
    document: str
    expected: int
    readable: int
    """Expected rows on pages with a text layer."""
    exact: int
    wrong: int
    missed: int
    spurious: int
    extracted: int
    flag_disagreements: int
    """Exact pairs whose high/low/normal flag differs (reported, not gated)."""
    recall: float
    coverage: float | None
    review: str
    expect_review: bool
    must_review: bool
    """expect_review, or recall under REVIEW_BELOW_RECALL."""
    error: str = ""
    """The step error that stopped the document (e.g. the router refused it)."""
    wrong_rows: list[Miss] = []
    missed_rows: list[Miss] = []
    spurious_rows: list[Miss] = []
    diagnoses: DiagnosisScore = DiagnosisScore(expected=0, matched=0)
    scan: str = ""
    """How the document was scanned ("" for a text document): ``ExpectedDocument.scan``."""
    ocr_pages: int = 0
    ocr_cpu_s: float = 0.0
    unverified: int = 0
    """Accepted values marked ``unverified`` (no check vouched for them, or a name the
    analyte table does not know): kept, but a person confirms them."""
    unverified_names: list[str] = []
    """Their names as printed, in document order (names only: no value)."""

    @property
    def flagged(self) -> bool:
        """Flagged for review, or stopped by a step error: not a plain success."""
        return bool(self.review or self.error)


class Totals(msgspec.Struct, frozen=True, kw_only=True):
    documents: int
    expected: int
    readable: int
    exact: int
    exact_readable: int
    wrong: int
    missed: int
    spurious: int
    extracted: int
    flag_disagreements: int
    unverified: int = 0
    """Accepted values marked ``unverified``, over the corpus."""
    diagnoses_expected: int
    diagnoses_matched: int
    diagnoses_spurious: int
    recall: float
    """Exact rows on text pages / expected rows on text pages."""
    spurious_rate: float
    """Spurious / extracted."""


class Limits(msgspec.Struct, frozen=True, kw_only=True):
    max_wrong: int = 0
    min_recall: float = 0.95
    max_spurious: float = 0.01


class Gate(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    ok: bool
    actual: str
    limit: str
    detail: str = ""


def score_document(
    truth: ExpectedDocument,
    pairs: Sequence[Pair],
    *,
    review: str,
    coverage: float | None,
    error: str = "",
    diagnoses: DiagnosisScore | None = None,
) -> DocumentScore:
    """The figures of one document from its pairs."""
    count = {outcome: 0 for outcome in Outcome}
    for pair in pairs:
        count[pair.outcome] += 1
    expected = len(truth.results)
    unverified = [p.found.name for p in pairs if p.found is not None and _unverified(p.found)]
    readable = sum(1 for r in truth.results if r.page not in truth.image_pages)
    recall = count[Outcome.EXACT] / expected if expected else 1.0
    return DocumentScore(
        layout=truth.layout,
        document=truth.document,
        expected=expected,
        readable=readable,
        exact=count[Outcome.EXACT],
        wrong=count[Outcome.WRONG],
        missed=count[Outcome.MISSED],
        spurious=count[Outcome.SPURIOUS],
        extracted=count[Outcome.EXACT] + count[Outcome.WRONG] + count[Outcome.SPURIOUS],
        flag_disagreements=sum(1 for p in pairs if _flag_disagrees(p)),
        recall=recall,
        coverage=coverage,
        review=review,
        expect_review=truth.expect_review,
        must_review=truth.expect_review or recall < REVIEW_BELOW_RECALL,
        error=error,
        wrong_rows=[_miss(p) for p in pairs if p.outcome is Outcome.WRONG],
        missed_rows=[_miss(p) for p in pairs if p.outcome is Outcome.MISSED],
        spurious_rows=[_miss(p) for p in pairs if p.outcome is Outcome.SPURIOUS],
        diagnoses=diagnoses or DiagnosisScore(expected=len(truth.diagnoses), matched=0),
        scan=truth.scan,
        unverified=len(unverified),
        unverified_names=unverified,
    )


def _unverified(found: Biomarker) -> bool:
    return found.provenance is not None and found.provenance.unverified


def trusted_strays(pairs: Sequence[Pair]) -> int:
    """Spurious results accepted as ordinary ones (not ``unverified``): a value that matches
    no expected row, most often under a misread name (``Hemoglobin Alc``), taken as true."""
    return sum(
        1
        for p in pairs
        if p.outcome is Outcome.SPURIOUS and p.found is not None and not _unverified(p.found)
    )


def exact_readable(truth: ExpectedDocument, pairs: Sequence[Pair]) -> int:
    """Exact pairs whose expected row is on a page with a text layer."""
    return sum(
        1
        for p in pairs
        if p.outcome is Outcome.EXACT and p.expected and p.expected.page not in truth.image_pages
    )


def totals(scores: Sequence[DocumentScore], exact_on_text: int) -> Totals:
    """Sums over the corpus; ``exact_on_text`` from ``exact_readable`` per document."""
    readable = sum(s.readable for s in scores)
    extracted = sum(s.extracted for s in scores)
    spurious = sum(s.spurious for s in scores)
    return Totals(
        documents=len(scores),
        expected=sum(s.expected for s in scores),
        readable=readable,
        exact=sum(s.exact for s in scores),
        exact_readable=exact_on_text,
        wrong=sum(s.wrong for s in scores),
        missed=sum(s.missed for s in scores),
        spurious=spurious,
        extracted=extracted,
        flag_disagreements=sum(s.flag_disagreements for s in scores),
        unverified=sum(s.unverified for s in scores),
        diagnoses_expected=sum(s.diagnoses.expected for s in scores),
        diagnoses_matched=sum(s.diagnoses.matched for s in scores),
        diagnoses_spurious=sum(len(s.diagnoses.spurious) for s in scores),
        recall=exact_on_text / readable if readable else 1.0,
        spurious_rate=spurious / extracted if extracted else 0.0,
    )


def gates(scores: Sequence[DocumentScore], total: Totals, limits: Limits) -> list[Gate]:
    """Each gate with its verdict; the corpus passes when all are ok."""
    unflagged = [s.layout for s in scores if s.must_review and not s.flagged]
    return [
        Gate(
            name="wrong values",
            ok=total.wrong <= limits.max_wrong,
            actual=str(total.wrong),
            limit=f"<= {limits.max_wrong}",
        ),
        Gate(
            name="exact recall",
            ok=total.recall >= limits.min_recall,
            actual=f"{total.recall:.1%}",
            limit=f">= {limits.min_recall:.0%}",
        ),
        Gate(
            name="spurious rate",
            ok=total.spurious_rate <= limits.max_spurious,
            actual=f"{total.spurious_rate:.1%}",
            limit=f"<= {limits.max_spurious:.0%}",
        ),
        Gate(
            name="review when needed",
            ok=not unflagged,
            actual=f"{len(unflagged)} not flagged",
            limit="0 not flagged",
            detail=", ".join(unflagged),
        ),
    ]


def describe(row: ExpectedResult | Biomarker | None) -> str:
    """``name: value_text [number] unit`` as the row states it and as it reads as a number."""
    if row is None:
        return ""
    unit = f" {row.unit}" if row.unit else ""
    number = "" if row.value is None else f" [{row.value:g}]"
    return f"{row.name}: {row.value_text}{number}{unit}"


def _miss(pair: Pair) -> Miss:
    page = pair.expected.page if pair.expected else 0
    if pair.found is not None and pair.found.provenance is not None:
        page = page or pair.found.provenance.page
    return Miss(page=page, expected=describe(pair.expected), found=describe(pair.found))


def _flag_disagrees(pair: Pair) -> bool:
    if pair.outcome is not Outcome.EXACT or pair.expected is None or pair.found is None:
        return False
    return bool(pair.expected.flag and pair.found.flag) and pair.expected.flag != pair.found.flag
