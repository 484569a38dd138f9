"""The parser step: the pages blob, the output bound, the extractor choice (the LLM
extractor itself: tests/steps/test_extract_llm.py)."""

from __future__ import annotations

import msgspec
import pytest
from structlog.testing import capture_logs

from saga.steps.config import ExtractorKind, StepConfig
from saga.steps.errors import NotFoundError, PayloadTooLargeError, PermanentError
from saga.steps.models import Flag, RouterOutput
from saga.steps.parser import parse
from saga.steps.testing import ManualContext, ScriptedLLM, make_context

PAGE = "Hemoglobin A1c  6.1  %  4.0-5.6  H\nDiagnoses\nE11.9 Type 2 diabetes"
SECRET = "Quokka-4411"  # page text that must not leak into messages
ROUTED = RouterOutput(document_name="r.pdf", media_type="application/pdf", page_count=1)
LLM_CONFIG = StepConfig(extractor=ExtractorKind.LLM)


def llm_ctx(*replies: str | Exception, pages: list[str] | None = None) -> ManualContext:
    return make_context(
        step="parser",
        pages=pages if pages is not None else [f"{PAGE}\n{SECRET}"],
        config=LLM_CONFIG,
        llm=ScriptedLLM(list(replies)),
    )


@pytest.mark.anyio
async def test_rules_parser_counts_what_it_found() -> None:
    """The rules extractor's findings come back with their counts."""
    out = await parse(make_context(step="parser", pages=[PAGE]), ROUTED)
    assert (out.biomarker_count, out.diagnosis_count, out.procedure_count, out.genetic_count) == (
        1,
        1,
        0,
        0,
    )
    assert out.extraction.biomarkers[0].flag is Flag.HIGH


@pytest.mark.anyio
async def test_expired_pages_blob_is_not_found() -> None:
    """No pages (the blob's TTL ran out): NotFoundError pointing back to the router."""
    with pytest.raises(NotFoundError, match="retry from the router"):
        await parse(make_context(step="parser", pages=None), ROUTED)


@pytest.mark.anyio
async def test_extraction_over_the_output_limit() -> None:
    """An extraction larger than max_output_bytes is a PayloadTooLargeError."""
    pages = ["\n".join(f"Analyte {i}  {i}.5  mg/dL  1-2" for i in range(400))]
    ctx = make_context(step="parser", pages=pages, config=StepConfig(max_output_bytes=2048))
    with pytest.raises(PayloadTooLargeError) as caught:
        await parse(ctx, ROUTED)
    assert caught.value.what == "extraction size in bytes" and caught.value.limit == 2048


@pytest.mark.anyio
async def test_llm_extractor_without_an_llm_is_permanent() -> None:
    """extractor=llm on a deployment with no LLM port: a permanent error saying so."""
    ctx = make_context(step="parser", pages=[PAGE], config=LLM_CONFIG)
    with pytest.raises(PermanentError, match="no LLM"):
        await parse(ctx, ROUTED)


@pytest.mark.anyio
async def test_parser_logs_counts_not_text() -> None:
    """The parsed event carries counts and the extractor kind, never page text."""
    with capture_logs() as logs:
        await parse(make_context(step="parser", pages=[f"{PAGE}\n{SECRET}"]), ROUTED)
    event = next(e for e in logs if e["event"] == "document parsed")
    assert (event["extractor"], event["biomarkers"]) == ("rules", 1)
    assert SECRET not in repr(logs)


@pytest.mark.anyio
async def test_llm_values_pass_the_same_checks_and_rejections_ask_for_review() -> None:
    """A model that reads the range's bound as the value sees it rejected, with a review reason."""
    line = PAGE.splitlines()[0]  # the model cites it: 5.6 is on it, as the range's bound
    misread = {"name": "Hemoglobin A1c", "value": 5.6, "unit": "%", "page": 1, "line": line}
    ctx = llm_ctx(msgspec.json.encode({"biomarkers": [misread]}).decode(), pages=[PAGE])
    out = await parse(ctx, ROUTED)
    assert out.extraction.biomarkers == []
    [rejected] = out.extraction.rejected
    assert "reference range" in rejected.reason
    assert out.review == "nothing was extracted; 1 value rejected by the checks"


@pytest.mark.anyio
async def test_rules_results_carry_provenance_and_canonical_names() -> None:
    """Each accepted value names its page, line and span; the synonym table names the analyte."""
    out = await parse(make_context(step="parser", pages=["x", PAGE]), ROUTED)
    [found] = out.extraction.biomarkers
    assert found.provenance is not None and found.provenance.page == 2
    line = found.provenance.line
    assert line[found.provenance.start : found.provenance.end] == found.value_text == "6.1"
    assert (found.canonical_name, found.loinc) == ("Hemoglobin A1c", "4548-4")
    assert out.extraction.coverage.ratio == 1.0 and out.review == ""


@pytest.mark.anyio
async def test_empty_pages_count_as_textless_even_when_the_router_names_none() -> None:
    """A text cover page then pages that came out empty: review names those pages."""
    pages = ["FAX COVER SHEET\nTo: Dr. Example", "", "  "]
    routed = RouterOutput(document_name="f.pdf", media_type="application/pdf", page_count=3)
    out = await parse(make_context(step="parser", pages=pages), routed)
    assert out.review == "nothing was extracted; pages 2, 3 had no text"
