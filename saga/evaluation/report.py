"""The evaluation as text for people: a table per document, the total, the gates."""

from __future__ import annotations

from saga.cli.common import colour, table
from saga.evaluation.evaluate import Report
from saga.evaluation.scans import ScanClass
from saga.evaluation.score import DocumentScore, Miss

DOCUMENT_HEADERS = (
    "layout",
    "expected",
    "exact",
    "wrong",
    "missed",
    "spurious",
    "recall",
    "coverage",
    "review",
    "must review",
    "diagnoses",
)


def render(report: Report, *, verbose: bool = False) -> str:
    """The whole report; ``verbose`` lists missed and spurious rows as well as wrong ones."""
    rows = [_document_row(s) for s in report.documents if not s.scan]
    t = report.total
    rows.append(
        (
            "TOTAL",
            t.expected,
            t.exact,
            t.wrong,
            t.missed,
            t.spurious,
            f"{t.recall:.1%}",
            "",
            sum(1 for s in report.documents if s.flagged),
            sum(1 for s in report.documents if s.must_review),
            _diagnoses(t.diagnoses_matched, t.diagnoses_expected, t.diagnoses_spurious),
        )
    )
    parts = [table(DOCUMENT_HEADERS, rows)]
    parts.append(
        f"\nexact recall {t.recall:.1%} ({t.exact_readable}/{t.readable} rows on text pages), "
        f"spurious {t.spurious_rate:.1%} ({t.spurious}/{t.extracted} extracted), "
        f"wrong values {t.wrong}, flags that disagree {t.flag_disagreements}"
    )
    if report.scans:
        parts.append("\nscanned documents (read by OCR):")
        parts.append(
            table(DOCUMENT_HEADERS, [_document_row(s) for s in report.documents if s.scan])
        )
        parts.append("")
        parts.append(table(SCAN_HEADERS, [_scan_row(c) for c in report.scans]))
    parts.append("")
    parts.append(
        table(
            ("gate", "actual", "limit", "verdict", "detail"),
            [
                (
                    g.name,
                    g.actual,
                    g.limit,
                    colour("ok", "32") if g.ok else colour("FAIL", "31"),
                    g.detail,
                )
                for g in report.gates
            ],
        )
    )
    details = _details(report.documents, verbose)
    if details:
        parts.append("")
        parts.extend(details)
    return "\n".join(parts)


SCAN_HEADERS = (
    "scan",
    "docs",
    "expected",
    "exact",
    "recall",
    "wrong",
    "unflagged",
    "flagged",
    "cpu/page",
)


def _scan_row(c: ScanClass) -> tuple[object, ...]:
    return (
        c.kind,
        c.documents,
        c.expected,
        c.exact,
        f"{c.recall:.0%}" if c.expected else "-",
        c.wrong,
        colour(str(c.wrong_unflagged), "31") if c.wrong_unflagged else 0,
        c.flagged,
        f"{c.cpu_per_page:.1f}s" if c.pages else "-",
    )


def _document_row(s: DocumentScore) -> tuple[object, ...]:
    review = "error" if s.error else ("yes" if s.review else "no")
    must = "yes" if s.must_review else "no"
    if s.must_review and not s.flagged:
        must = colour("yes (not flagged)", "31")
    coverage = "-" if s.coverage is None else f"{s.coverage:.0%}"
    return (
        s.layout,
        s.expected,
        s.exact,
        colour(str(s.wrong), "31") if s.wrong else 0,
        s.missed,
        s.spurious,
        f"{s.recall:.0%}",
        coverage,
        review,
        must,
        _diagnoses(s.diagnoses.matched, s.diagnoses.expected, len(s.diagnoses.spurious)),
    )


def _diagnoses(matched: int, expected: int, spurious: int) -> str:
    """``matched/expected``, and ``+N`` for diagnoses found that the document does not state."""
    text = f"{matched}/{expected}" if expected else "-"
    return f"{text} +{spurious}" if spurious else text


def _details(scores: list[DocumentScore], verbose: bool) -> list[str]:
    lines: list[str] = []
    for s in scores:
        if s.error:
            lines.append(f"{s.layout}: stopped: {s.error}")
        if s.review:
            lines.append(f"{s.layout}: review: {s.review}")
        lines += _rows(s.layout, "WRONG", s.wrong_rows)
        if verbose:
            lines += _rows(s.layout, "missed", s.missed_rows)
            lines += _rows(s.layout, "spurious", s.spurious_rows)
            lines += [f"{s.layout}: missed diagnosis {d!r}" for d in s.diagnoses.missed]
            lines += [f"{s.layout}: spurious diagnosis {d!r}" for d in s.diagnoses.spurious]
    return lines


def _rows(layout: str, kind: str, rows: list[Miss]) -> list[str]:
    out = []
    for row in rows:
        if row.expected and row.found:
            text = f"expected {row.expected!r}, found {row.found!r}"
        else:
            text = repr(row.expected or row.found)
        page = f"p{row.page}" if row.page else "p?"
        out.append(f"{layout}: {kind} {page}: {text}")
    return out
