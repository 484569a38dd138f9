"""Scores, totals and gates from pairs; truth files that cannot be used."""

from __future__ import annotations

import re
from pathlib import Path

import msgspec
import pytest

from saga.evaluation.diagnoses import score_diagnoses
from saga.evaluation.evaluate import load_corpus, score_run
from saga.evaluation.runner import StepsRun
from saga.evaluation.score import DocumentScore, Limits, gates, totals
from saga.evaluation.truth import ExpectedDocument, TruthError, dump_truth
from saga.steps.models import Biomarker, Diagnosis, Extraction, ParserOutput
from tests.evaluation.test_matching import found, row


def truth(
    *results: object, image_pages: tuple[int, ...] = (), review: bool = False
) -> ExpectedDocument:
    return ExpectedDocument(
        layout="doc",
        document="doc.pdf",
        description="",
        results=list(results),  # type: ignore[arg-type]
        page_count=2,
        expect_review=review,
        image_pages=list(image_pages),
    )


def run(*biomarkers: Biomarker, review: str = "") -> StepsRun:
    return StepsRun(output=ParserOutput.of(Extraction(biomarkers=list(biomarkers)), review=review))


def scored(t: ExpectedDocument, r: StepsRun) -> tuple[DocumentScore, int]:
    return score_run(t, r)


def test_document_counts_and_recall() -> None:
    """4 rows: one exact, one wrong, two missed; one spurious; recall 25%."""
    t = truth(row("A", 1), row("B", 2), row("C", 3), row("D", 4))
    score, _ = scored(t, run(found("A", 1), found("B", 9), found("Z", 5)))
    assert (score.exact, score.wrong, score.missed, score.spurious) == (1, 1, 2, 1)
    assert score.extracted == 3
    assert score.recall == 0.25
    assert score.must_review and not score.flagged


def test_rows_on_image_pages_leave_the_total_recall() -> None:
    """Rows on a scanned page count in the document's recall, not in the corpus recall."""
    t = truth(row("A", 1), row("B", 2, page=2), image_pages=(2,), review=True)
    score, on_text = scored(t, run(found("A", 1), review="page 2 has no text"))
    total = totals([score], on_text)
    assert score.recall == 0.5
    assert (total.readable, total.exact_readable, total.recall) == (1, 1, 1.0)


def test_gates_pass_on_a_perfect_corpus() -> None:
    """All exact, nothing spurious, nothing that needs review: every gate ok."""
    score, on_text = scored(truth(row("A", 1)), run(found("A", 1)))
    assert all(g.ok for g in gates([score], totals([score], on_text), Limits()))


def test_one_wrong_value_fails_the_wrong_gate() -> None:
    """--max-wrong 0 fails on one wrong value; --max-wrong 1 lets it through."""
    t = truth(*(row(f"R{i}", i) for i in range(30)))
    score, on_text = scored(t, run(*(found(f"R{i}", i if i else 99) for i in range(30))))
    total = totals([score], on_text)
    verdict = {g.name: g.ok for g in gates([score], total, Limits())}
    assert verdict == {
        "wrong values": False,
        "exact recall": True,
        "spurious rate": True,
        "review when needed": True,
    }
    assert all(g.ok for g in gates([score], total, Limits(max_wrong=1)))


def test_spurious_rate_is_against_extracted_results() -> None:
    """1 spurious of 10 extracted is 10%: over a 2% limit, under a 20% one."""
    t = truth(*(row(f"R{i}", i) for i in range(9)))
    score, on_text = scored(t, run(*(found(f"R{i}", i) for i in range(9)), found("X", 1)))
    total = totals([score], on_text)
    assert total.spurious_rate == pytest.approx(0.1)
    by_name = {g.name: g.ok for g in gates([score], total, Limits())}
    assert by_name["spurious rate"] is False
    by_name = {g.name: g.ok for g in gates([score], total, Limits(max_spurious=0.2))}
    assert by_name["spurious rate"] is True


def test_low_recall_document_must_be_flagged() -> None:
    """Recall under 90% without review fails the review gate; with a review reason it passes."""
    t = truth(row("A", 1), row("B", 2))
    for review, ok in (("", False), ("coverage 40%", True)):
        score, on_text = scored(t, run(found("A", 1), review=review))
        by_name = {g.name: g for g in gates([score], totals([score], on_text), Limits())}
        assert by_name["review when needed"].ok is ok
        assert by_name["review when needed"].detail == ("" if ok else "doc")


def test_a_document_under_90_percent_recall_must_be_flagged() -> None:
    """Issue 28: 9 of 10 rows is fine unflagged, 8 of 10 (80%, once the threshold) is not."""
    rows = [row(f"A{i}", i) for i in range(1, 11)]
    for kept, must in ((9, False), (8, True)):
        score, _ = scored(truth(*rows), run(*(found(f"A{i}", i) for i in range(1, kept + 1))))
        assert score.must_review is must


def test_expected_review_is_required_even_at_full_recall() -> None:
    """A scanned document must be flagged however much of its text was read."""
    score, on_text = scored(truth(row("A", 1), review=True), run(found("A", 1)))
    by_name = {g.name: g.ok for g in gates([score], totals([score], on_text), Limits())}
    assert by_name["review when needed"] is False


def test_a_document_the_router_refused_counts_as_flagged() -> None:
    """A step error stops the saga (dead letter): not a silent success, so review is satisfied."""
    score, _ = scored(truth(row("A", 1), review=True), StepsRun(error="InvalidInputError: no text"))
    assert score.flagged and score.missed == 1 and score.coverage is None


def test_truth_files_that_cannot_be_used(tmp_path: Path) -> None:
    """No directory, no truth files, a truth naming a missing PDF, bad JSON: TruthError each."""
    with pytest.raises(TruthError, match="not a directory"):
        load_corpus(tmp_path / "nope")
    with pytest.raises(TruthError, match=re.escape("no *.truth.json")):
        load_corpus(tmp_path)
    (tmp_path / "doc.truth.json").write_bytes(dump_truth(truth(row("A", 1))))
    with pytest.raises(TruthError, match=re.escape("names 'doc.pdf'")):
        load_corpus(tmp_path)
    (tmp_path / "doc.pdf").write_bytes(b"%PDF-1.4")
    assert [t.layout for t in load_corpus(tmp_path)] == ["doc"]
    (tmp_path / "bad.truth.json").write_text("{not json")
    with pytest.raises(TruthError, match=re.escape("bad.truth.json is not a readable truth file")):
        load_corpus(tmp_path)


def test_diagnoses_are_matched_by_containment_and_extra_ones_are_spurious() -> None:
    """A found diagnosis holding the written one matches; a page footer read as one is spurious."""
    found_dx = [
        Diagnosis(name="Sepsis secondary to urinary tract infection", code="A41.9"),
        Diagnosis(name="Printed 03/05/2024 14:22 Page 2 of 3"),
    ]
    result = score_diagnoses(["Sepsis secondary to urinary tract infection", "AKI"], found_dx)
    assert (result.expected, result.matched) == (2, 1)
    assert result.missed == ["AKI"]
    assert result.spurious == ["Printed 03/05/2024 14:22 Page 2 of 3"]


def test_a_spurious_value_counts_as_trusted_unless_kept_unverified() -> None:
    """``HEMOGLOBIN Ac 6.1`` matches no expected row: trusted as an ordinary result it is a
    stray (the scans' gate fails on it); kept ``unverified`` it is a person's to check."""
    from saga.evaluation.matching import match
    from saga.evaluation.scans import scan_classes, scan_gates
    from saga.evaluation.score import trusted_strays
    from saga.steps.models import Provenance

    expected = [row("Hemoglobin A1c", 6.1, "%")]
    where = Provenance(page=1, line="HEMOGLOBIN Ac  6.1  %")
    trusted = found("HEMOGLOBIN Ac", 6.1, "%", provenance=where)
    marked = found(
        "HEMOGLOBIN Ac", 6.1, "%", provenance=Provenance(page=1, line="x", unverified=True)
    )
    assert trusted_strays(match(expected, [trusted])) == 1
    assert trusted_strays(match(expected, [marked])) == 0
    assert trusted_strays(match(expected, [found("Hemoglobin A1c", 6.1, "%")])) == 0  # exact
    score = msgspec.structs.replace(scored(truth(*expected), run(trusted))[0], scan="fax-200x100")
    by_name = {g.name: g for g in scan_gates([score], scan_classes([score]), ["doc"])}
    assert (
        not by_name["scans: strays trusted"].ok and by_name["scans: strays trusted"].detail == "doc"
    )
