"""The extraction gates over the whole corpus, as CI runs them (``saga eval`` on it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from saga.evaluation.evaluate import evaluate
from saga.evaluation.report import render
from saga.evaluation.score import Limits


@pytest.mark.anyio
async def test_corpus_passes_every_gate(corpus_dir: Path) -> None:
    """No wrong value, exact recall >= 95%, spurious <= 1%, and every document that needs a
    person's review (scanned pages, recall under 90%) flagged for it."""
    report = await evaluate(corpus_dir, Limits())
    if not report.ok:
        pytest.fail("\n" + render(report, verbose=True), pytrace=False)
