"""The LLM extractor with a scripted port: requests per chunk, repair, grounding, merging."""

from __future__ import annotations

import json
from typing import Any

import pytest
from structlog.testing import capture_logs

from saga.steps.config import ExtractorKind, StepConfig
from saga.steps.errors import CircuitOpenError, PermanentError, RetryableError
from saga.steps.extract_llm import REPAIR_PURPOSE, extract_llm
from saga.steps.llm_prompt import instructions
from saga.steps.models import Flag
from saga.steps.testing import ManualContext, ScriptedLLM, make_context

pytestmark = pytest.mark.anyio

LINE = "Hemoglobin A1c  6.1  %  4.0-5.6  H"
PAGE = f"{LINE}\nDiagnoses\nE11.9 Type 2 diabetes"
SECRET = "Quokka-4411"  # page text that must not leak into messages
CONFIG = StepConfig(extractor=ExtractorKind.LLM)


def hba1c(value: float = 6.1, page: int = 1, **more: Any) -> dict[str, Any]:
    return {"name": "HbA1c", "value": value, "value_text": str(value), "unit": "%",
            "flag": "high", "page": page, "line": LINE, **more}  # fmt: skip


def answer(*results: dict[str, Any], diagnoses: list[dict[str, str]] | None = None) -> str:
    return json.dumps({"biomarkers": list(results), "diagnoses": diagnoses or []})


GOOD = answer(hba1c(), diagnoses=[{"name": "Type 2 diabetes", "code": "E11.9"}])


def ctx_of(
    *replies: str | Exception, pages: list[str] | None = None, window: int = 128_000
) -> ManualContext:
    llm = ScriptedLLM(list(replies), max_input_tokens=window)
    pages = pages if pages is not None else [f"{PAGE}\n{SECRET}"]
    return make_context(step="parser", pages=pages, config=CONFIG, llm=llm)


def calls(ctx: ManualContext) -> list[tuple[str, list[dict[str, str]]]]:
    assert isinstance(ctx.llm, ScriptedLLM)
    return ctx.llm.calls


async def run(ctx: ManualContext) -> Any:
    assert ctx.pages is not None
    return await extract_llm(ctx, ctx.pages)


async def test_without_an_llm_is_permanent() -> None:
    """extractor=llm on a deployment with no LLM port: a permanent error saying so."""
    ctx = make_context(step="parser", pages=[PAGE], config=CONFIG)
    with pytest.raises(PermanentError, match="no LLM"):
        await run(ctx)


async def test_a_fenced_answer_is_grounded_with_its_provenance() -> None:
    """A fenced JSON answer: the value found on its line, with page, line and span."""
    ctx = ctx_of(f"```json\n{GOOD}\n```")
    extraction = await run(ctx)
    [b] = extraction.biomarkers
    assert (b.name, b.value, b.value_text, b.unit, b.flag) == ("HbA1c", 6.1, "6.1", "%", Flag.HIGH)
    assert b.provenance is not None and (b.provenance.page, b.provenance.line) == (1, LINE)
    assert LINE[b.provenance.start : b.provenance.end] == "6.1"
    assert [(d.name, d.code) for d in extraction.diagnoses] == [("Type 2 diabetes", "E11.9")]
    [(purpose, messages)] = calls(ctx)
    assert purpose == "extract"
    assert messages[0]["content"] == instructions() and '"LabResult"' in messages[0]["content"]
    assert SECRET in messages[1]["content"] and "=== page 1 ===" in messages[1]["content"]


async def test_a_value_the_page_does_not_state_is_rejected_as_ungrounded() -> None:
    """The model says 7.4 where the page says 6.1: rejected with the reason, never accepted."""
    ctx = ctx_of(answer(hba1c(7.4)))
    extraction = await run(ctx)
    assert extraction.biomarkers == []
    [rejected] = extraction.rejected
    assert rejected.name == "HbA1c" and rejected.value_text == "7.4"
    assert rejected.reason == "ungrounded: 7.4 does not occur on page 1"


async def test_a_page_the_request_did_not_carry_is_ungrounded() -> None:
    """Citing a page outside the request's pages is rejected, even if that page has the value."""
    pages = [PAGE, "x " * 1100 + "\n" + LINE]  # a request each
    ctx = ctx_of(answer(hba1c(page=2)), answer(), pages=pages, window=3_600)
    extraction = await run(ctx)
    assert len(calls(ctx)) == 2 and extraction.biomarkers == []
    assert "cites page 2, which it was not given" in extraction.rejected[0].reason


async def test_invalid_json_is_repaired_without_resending_pages() -> None:
    """Schema-invalid JSON earns one repair quoting the error; the pages are not sent again."""
    bad = GOOD.replace('"value": 6.1', '"value": "six"')
    ctx = ctx_of(bad, GOOD)
    assert len((await run(ctx)).biomarkers) == 1
    (_, _), (purpose, messages) = calls(ctx)
    assert purpose == REPAIR_PURPOSE
    repair = messages[-1]["content"]
    assert "$.biomarkers[0].value" in repair and '"six"' in repair
    assert all(SECRET not in m["content"] for m in messages)
    assert ctx.heartbeats == 1


async def test_a_prose_answer_is_repaired_in_the_conversation() -> None:
    """An answer with no JSON continues the conversation: the pages appear once."""
    ctx = ctx_of("Sure! Here are the results you asked for.", GOOD)
    assert len((await run(ctx)).biomarkers) == 1
    messages = calls(ctx)[1][1]
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user"]
    assert sum(SECRET in m["content"] for m in messages) == 1


async def test_garbage_twice_is_permanent_without_quoting_it() -> None:
    """Two invalid answers: PermanentError with the reason and the pages, no page text."""
    garbage = f"{{'{SECRET}': Tangerine-9"
    ctx = ctx_of(garbage, answer(hba1c(flag="Tangerine-9")))
    with capture_logs() as logs, pytest.raises(PermanentError, match="invalid twice") as caught:
        await run(ctx)
    message = str(caught.value)
    assert "Tangerine" not in message and SECRET not in message
    assert "of page 1" in message and "$.biomarkers[0].flag" in message
    assert "Tangerine" not in repr(logs) and SECRET not in repr(logs)


@pytest.mark.parametrize(
    "error", [RetryableError("provider 503"), CircuitOpenError("llm", 1_900_000_000.0)]
)
async def test_port_errors_propagate(error: Exception) -> None:
    """Retryable and circuit-open errors from the port reach the executor unchanged."""
    with pytest.raises(type(error)):
        await run(ctx_of(error))


async def test_results_repeated_across_requests_are_kept_once() -> None:
    """A page cut in two parts that both report the same result, and a diagnosis on every
    page: one biomarker (same analyte, value, unit, page), one diagnosis."""
    filler = [f"note {i} " + "lorem ipsum " * 20 for i in range(30)]
    page = "\n".join([LINE, *filler, LINE])
    diagnosis = [{"name": "Type 2 diabetes", "code": "E11.9"}]
    replies = [answer(hba1c(), diagnoses=diagnosis) for _ in range(20)]
    ctx = ctx_of(*replies, pages=[page, "E11.9 Type 2 diabetes"], window=4_000)
    extraction = await run(ctx)
    assert len(calls(ctx)) >= 2
    assert [b.name for b in extraction.biomarkers] == ["HbA1c"]
    assert len(extraction.diagnoses) == 1 and extraction.rejected != []


async def test_too_many_requests_fail_before_any_call() -> None:
    """A document needing more requests than SAGA_MAX_PAGES: one sentence, nothing spent."""
    pages = ["\n".join(f"line {i} " + "word " * 30 for i in range(40))] * 3
    llm = ScriptedLLM([], max_input_tokens=4_000)
    ctx = make_context(step="parser", pages=pages, llm=llm,
                       config=StepConfig(extractor=ExtractorKind.LLM, max_pages=5))  # fmt: skip
    with pytest.raises(PermanentError, match=r"needs \d+ model requests .* over the limit of 5"):
        await run(ctx)
    assert llm.calls == []


async def test_a_window_too_small_for_the_prompt_is_permanent() -> None:
    """SAGA_LLM_MAX_INPUT_TOKENS below the prompt: a permanent error that names the setting."""
    with pytest.raises(PermanentError, match="SAGA_LLM_MAX_INPUT_TOKENS"):
        await run(ctx_of(GOOD, window=1_000))


async def test_a_value_in_another_analytes_column_is_rejected() -> None:
    """Side-by-side results: a value read past another analyte's name is rejected as
    ungrounded; the values in their own columns stand."""
    line = "Sodium  140 mmol/L    Potassium  4.2 mmol/L"
    claims = [{"name": "Sodium", "value": 4.2, "page": 1, "line": line},
              {"name": "Potassium", "value": 4.2, "page": 1, "line": line}]  # fmt: skip
    ctx = ctx_of(answer(*claims), pages=[line])
    extraction = await run(ctx)
    assert [(b.name, b.value) for b in extraction.biomarkers] == [("Potassium", 4.2)]
    [rejected] = extraction.rejected
    assert rejected.name == "Sodium" and "past another analyte's name" in rejected.reason
    assert rejected.provenance is not None and rejected.provenance.line == line
