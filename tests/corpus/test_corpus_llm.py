"""The checks do not refuse what is right: a model that answers every corpus row as the
truth states it has nothing rejected by the checks (grounding aside), on every layout."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from saga.evaluation.truth import ExpectedDocument, find_truths, load_truth
from saga.steps.config import ExtractorKind, StepConfig
from saga.steps.context import Document
from saga.steps.lab_values import parse_range
from saga.steps.models import RouterOutput
from saga.steps.numbers import decide
from saga.steps.page_layout import working_copy
from saga.steps.pages import split_pages
from saga.steps.parser import parse
from saga.steps.testing import ScriptedLLM, make_context


def _answer(truth: ExpectedDocument, pages: list[str]) -> str:
    """The truth as a model would answer it: the printed name, value, unit and range."""
    fmt = decide(pages)
    results: list[dict[str, Any]] = []
    for r in truth.results:
        if r.page in truth.image_pages:
            continue
        rng = parse_range(working_copy(r.reference, decimal_comma=fmt)) if r.reference else None
        results.append(
            {
                "name": r.name,
                "value": r.value,
                "value_text": r.value_text,
                "comparator": r.comparator,
                "unit": r.unit,
                "reference_text": r.reference,
                "reference_low": rng.low if rng else None,
                "reference_high": rng.high if rng else None,
                "flag": r.flag,
                "page": r.page,
            }
        )
    return json.dumps({"biomarkers": results})


@pytest.mark.anyio
async def test_a_right_answer_passes_every_check(corpus_dir: Path) -> None:
    """Every value a correct model returns is accepted or, at worst, refused by grounding
    (a wrapped name the model did not quote): no check of issue 28 refuses a true value."""
    refused = []
    for path in find_truths(corpus_dir):
        truth = load_truth(path)
        pdf = (corpus_dir / truth.document).read_bytes()
        pages = split_pages(Document(truth.document, "application/pdf", pdf), max_pages=20)
        llm = ScriptedLLM([_answer(truth, pages)])
        config = StepConfig(extractor=ExtractorKind.LLM)
        ctx = make_context(step="parser", pages=pages, config=config, llm=llm)
        routed = RouterOutput(
            document_name="x", media_type="application/pdf", page_count=len(pages)
        )
        out = await parse(ctx, routed)
        refused += [
            f"{truth.layout}: {r.name} {r.value_text}: {r.reason}"
            for r in out.extraction.rejected
            if not r.reason.startswith("ungrounded:")
        ]
        expected = {(r.name, r.value) for r in truth.results}
        assert {(b.name, b.value) for b in out.extraction.biomarkers} <= expected, truth.layout
    assert refused == []
