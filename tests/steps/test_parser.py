"""The parser step: the pages blob, the output bound, and the LLM extractor with a fake port."""

from __future__ import annotations

import msgspec
import pytest
from structlog.testing import capture_logs

from saga.steps.config import ExtractorKind, StepConfig
from saga.steps.errors import (
    CircuitOpenError,
    NotFoundError,
    PayloadTooLargeError,
    PermanentError,
    RetryableError,
)
from saga.steps.extract_llm import REPAIR_PURPOSE, instructions
from saga.steps.models import Biomarker, Diagnosis, Extraction, Flag, RouterOutput
from saga.steps.parser import parse
from saga.steps.testing import ManualContext, ScriptedLLM, make_context
from tests.steps.compare import core

PAGE = "Hemoglobin A1c  6.1  %  4.0-5.6  H\nDiagnoses\nE11.9 Type 2 diabetes"
SECRET = "Quokka-4411"  # page text that must not leak into messages
ROUTED = RouterOutput(document_name="r.pdf", media_type="application/pdf", page_count=1)
LLM_CONFIG = StepConfig(extractor=ExtractorKind.LLM)
GOOD = Extraction(
    biomarkers=[Biomarker(name="HbA1c", value=6.1, value_text="6.1", unit="%", flag=Flag.HIGH)],
    diagnoses=[Diagnosis(name="Type 2 diabetes", code="E11.9")],
)
GOOD_JSON = msgspec.json.encode(GOOD).decode()


def llm_ctx(*replies: str | Exception, pages: list[str] | None = None) -> ManualContext:
    return make_context(
        step="parser",
        pages=pages if pages is not None else [f"{PAGE}\n{SECRET}"],
        config=LLM_CONFIG,
        llm=ScriptedLLM(list(replies)),
    )


def calls(ctx: ManualContext) -> list[tuple[str, list[dict[str, str]]]]:
    assert isinstance(ctx.llm, ScriptedLLM)
    return ctx.llm.calls


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
async def test_llm_valid_json_in_a_fence_is_accepted() -> None:
    """A fenced JSON answer decodes to the Extraction; one call, purpose extract."""
    ctx = llm_ctx(f"```json\n{GOOD_JSON}\n```")
    out = await parse(ctx, ROUTED)
    assert core(out.extraction) == GOOD
    [(purpose, messages)] = calls(ctx)
    assert purpose == "extract"
    assert messages[0]["content"] == instructions() and '"Biomarker"' in messages[0]["content"]
    assert SECRET in messages[1]["content"] and "=== page 1 ===" in messages[1]["content"]


@pytest.mark.anyio
async def test_llm_invalid_json_is_repaired_without_resending_pages() -> None:
    """Schema-invalid JSON earns one repair quoting the error; the pages are not sent again."""
    bad = GOOD_JSON.replace('"value":6.1', '"value":"six"')
    ctx = llm_ctx(bad, GOOD_JSON)
    out = await parse(ctx, ROUTED)
    assert core(out.extraction) == GOOD
    (_, _), (purpose, messages) = calls(ctx)
    assert purpose == REPAIR_PURPOSE
    repair = messages[-1]["content"]
    assert "$.biomarkers[0].value" in repair and '"six"' in repair
    assert all(SECRET not in m["content"] for m in messages)
    assert ctx.heartbeats == 1


@pytest.mark.anyio
async def test_llm_prose_answer_is_repaired_in_the_conversation() -> None:
    """An answer with no JSON continues the conversation: the pages appear once."""
    ctx = llm_ctx("Sure! Here are the results you asked for.", GOOD_JSON)
    assert core((await parse(ctx, ROUTED)).extraction) == GOOD
    messages = calls(ctx)[1][1]
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user"]
    assert sum(SECRET in m["content"] for m in messages) == 1


@pytest.mark.anyio
async def test_llm_garbage_twice_is_permanent_without_quoting_it() -> None:
    """Two invalid answers: PermanentError with the reason, no completion or page text."""
    garbage = f"{{'{SECRET}': Tangerine-9"
    ctx = llm_ctx(garbage, '{"biomarkers": [{"name": "x", "flag": "Tangerine-9"}]}')
    with capture_logs() as logs, pytest.raises(PermanentError, match="invalid twice") as caught:
        await parse(ctx, ROUTED)
    message = str(caught.value)
    assert "Tangerine" not in message and SECRET not in message
    assert "$.biomarkers[0].flag" in message
    assert "Tangerine" not in repr(logs) and SECRET not in repr(logs)


@pytest.mark.anyio
@pytest.mark.parametrize(
    "error", [RetryableError("provider 503"), CircuitOpenError("llm", 1_900_000_000.0)]
)
async def test_llm_port_errors_propagate(error: Exception) -> None:
    """Retryable and circuit-open errors from the port reach the executor unchanged."""
    with pytest.raises(type(error)):
        await parse(llm_ctx(error), ROUTED)


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
    misread = Extraction(
        biomarkers=[Biomarker(name="Hemoglobin A1c", value=5.6, value_text="5.6", unit="%")]
    )
    ctx = llm_ctx(msgspec.json.encode(misread).decode(), pages=[PAGE])
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
