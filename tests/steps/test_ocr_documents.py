"""Whole scanned documents through the router and parser, as a worker runs them: a page
fed sideways, a mixed document, a blank scan and a photo of no document.

Real Tesseract on real pictures from the corpus scanner (skipped, with the reason, on a
machine without Tesseract and its English and German data)."""

from __future__ import annotations

from pathlib import Path

import pytest

from saga.evaluation.evaluate import score_run
from saga.evaluation.matching import match
from saga.evaluation.runner import StepsRun, run_pdf
from saga.evaluation.score import trusted_strays
from saga.evaluation.truth import ExpectedDocument
from saga.steps.config import StepConfig
from saga.steps.synonyms import canonical_name
from tests.corpus import layouts_ocr
from tests.ocr_marks import needs_tesseract

pytestmark = [
    pytest.mark.anyio,
    needs_tesseract("eng+deu+fra"),
]

OCR_ON = StepConfig(ocr=True)


async def _run(tmp_path: Path, layout: str) -> tuple[StepsRun, ExpectedDocument]:
    content, truth = getattr(layouts_ocr, layout)()
    path = tmp_path / truth.document
    path.write_bytes(content)
    return await run_pdf(path, OCR_ON), truth


async def test_a_page_fed_sideways_is_turned_upright_and_read(tmp_path: Path) -> None:
    run, truth = await _run(tmp_path, "rotated_labcorp")
    score, _ = score_run(truth, run)
    # read sideways, the page gives no value at all; turned, more than half of them
    assert score.exact * 2 > score.expected, score
    assert score.wrong == 0 or score.review


async def test_a_mixed_document_reads_its_text_page_as_text_and_its_scan_by_ocr(
    tmp_path: Path,
) -> None:
    run, truth = await _run(tmp_path, "mixed_quest")
    assert run.output is not None, run.error
    assert run.ocr_pages == 1  # only the scanned page went through OCR
    found = run.output.extraction.biomarkers
    text_page = [b for b in found if b.provenance and b.provenance.page == 1]
    scanned = [b for b in found if b.provenance and b.provenance.page == 2]
    assert text_page and all(b.provenance.ocr_confidence is None for b in text_page)  # type: ignore[union-attr]
    assert scanned, "no value was read from the scanned page"
    # a value accepted from OCR carries the confidence it was read at, never under the bar
    assert all((b.provenance.ocr_confidence or 0) >= 80 for b in scanned)  # type: ignore[union-attr]
    score, _ = score_run(truth, run)
    assert score.recall >= 0.8, score


async def test_a_faxs_misread_names_are_kept_unverified_and_reviewed(tmp_path: Path) -> None:
    """A standard fax (``HEMOGLOBIN Ac``, ``NON HOL CHOLESTEROL``): every value whose name
    as read the table does not know is unverified, none matching no expected row is
    trusted, and the review names a page for it."""
    run, truth = await _run(tmp_path, "fax_standard_quest_tiff")
    assert run.output is not None, run.error
    found = run.output.extraction.biomarkers
    unknown = [b for b in found if canonical_name(b.name) is None]
    assert unknown, "the fax no longer misreads a name: pick a harder document"
    assert all(b.provenance and b.provenance.unverified for b in unknown), unknown
    assert trusted_strays(match(truth.results, found)) == 0
    assert "with a name the analyte table does not know" in run.output.review


@pytest.mark.parametrize("layout", ["blank_scan", "photo_jpeg"])
async def test_a_page_with_nothing_to_read_is_refused_or_flagged_in_one_sentence(
    tmp_path: Path, layout: str
) -> None:
    run, _ = await _run(tmp_path, layout)
    if run.output is None:
        assert run.error.startswith("InvalidInputError: "), run.error
        message = run.error.removeprefix("InvalidInputError: ")
    else:
        assert run.output.extraction.biomarkers == []
        message = run.output.review
    assert message and "\n" not in message and "Traceback" not in message
    assert message.count(". ") == 0, message  # one sentence


async def test_ocr_off_refuses_an_image_document_as_any_unsupported_type(
    tmp_path: Path,
) -> None:
    content, truth = layouts_ocr.png_german()
    path = tmp_path / truth.document
    path.write_bytes(content)
    run = await run_pdf(path, StepConfig(ocr=False))
    assert run.output is None and run.error.startswith("InvalidInputError: unsupported media type")
