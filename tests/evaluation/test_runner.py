"""One PDF through the router and parser steps, as ``saga eval`` runs it."""

from __future__ import annotations

from pathlib import Path

import pytest

from saga.evaluation.runner import run_pdf
from saga.steps.config import ExtractorKind, StepConfig
from tests.evaluation.test_cmd_eval import write_clean_report


@pytest.mark.anyio
async def test_a_readable_pdf_gives_the_parser_output(tmp_path: Path) -> None:
    """The steps' own output comes back: three biomarkers, no error."""
    write_clean_report(tmp_path)
    run = await run_pdf(tmp_path / "clean_table.pdf")
    assert run.error == "" and run.output is not None
    assert sorted(b.name for b in run.output.extraction.biomarkers) == [
        "Glucose",
        "Potassium",
        "Sodium",
    ]


@pytest.mark.anyio
async def test_the_llm_setting_is_overridden_by_rules(tmp_path: Path) -> None:
    """SAGA_PARSER=llm in the settings still evaluates the rules extractor (no key, no cost)."""
    write_clean_report(tmp_path)
    run = await run_pdf(tmp_path / "clean_table.pdf", StepConfig(extractor=ExtractorKind.LLM))
    assert run.error == "" and run.output is not None and run.output.biomarker_count == 3


@pytest.mark.anyio
async def test_a_document_the_router_refuses_is_an_error_not_a_crash(tmp_path: Path) -> None:
    """Bytes that are not a PDF: the router's refusal is returned with its type."""
    path = tmp_path / "broken.pdf"
    path.write_bytes(b"%PDF-1.4 this is not really a PDF")
    run = await run_pdf(path)
    assert run.output is None
    assert run.error.startswith("InvalidInputError: ")


@pytest.mark.anyio
async def test_a_limit_from_the_settings_applies(tmp_path: Path) -> None:
    """max_pages from the step settings is the router's limit here too."""
    write_clean_report(tmp_path)
    run = await run_pdf(tmp_path / "clean_table.pdf", StepConfig(max_pages=0))
    assert run.error.startswith("PayloadTooLargeError: page count is 1")


@pytest.mark.anyio
async def test_an_unexpected_exception_is_reported_for_that_document(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bug in a step stops that document only, and says what it raised."""

    async def broken(*_: object) -> None:
        raise ValueError("boom")

    monkeypatch.setattr("saga.evaluation.runner.parse", broken)
    write_clean_report(tmp_path)
    run = await run_pdf(tmp_path / "clean_table.pdf")
    assert run.output is None and run.error == "unexpected ValueError: boom"
