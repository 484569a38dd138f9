"""Issue 29 on the corpus: a value whose name the analyte table does not know is kept,
``unverified``, and its document flagged, on every text layout (the scans' side is the
``scans: strays trusted`` gate of ``saga eval``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from saga.evaluation.evaluate import load_corpus
from saga.evaluation.runner import run_pdf
from saga.steps.synonyms import canonical_name


@pytest.mark.anyio
async def test_every_result_the_table_does_not_know_is_kept_unverified_and_reviewed(
    corpus_dir: Path,
) -> None:
    """The laboratory's own names (a veterinary panel's codes, urinalysis, serology) are
    read, not dropped; none is taken as a verified result, and each document says so."""
    checked = 0
    for truth in load_corpus(corpus_dir):
        if truth.scan or truth.image_pages:
            continue
        if all(canonical_name(r.name) is not None for r in truth.results):
            continue
        run = await run_pdf(corpus_dir / truth.document)
        assert run.output is not None, (truth.layout, run.error)
        unknown = [b for b in run.output.extraction.biomarkers if canonical_name(b.name) is None]
        assert unknown, truth.layout  # kept, not dropped
        for found in unknown:
            assert found.provenance is not None and found.provenance.unverified, found
        assert "with a name the analyte table does not know" in run.output.review, truth.layout
        checked += 1
    assert checked >= 5  # vet_chemistry, urinalysis, censored_qualitative, nhs_uk, ...
