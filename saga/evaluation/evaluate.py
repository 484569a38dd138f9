"""Score a corpus directory: every truth file's PDF through the steps, then the gates."""

from __future__ import annotations

from pathlib import Path

import msgspec

from saga.evaluation.diagnoses import score_diagnoses
from saga.evaluation.matching import match
from saga.evaluation.runner import StepsRun, run_pdf
from saga.evaluation.scans import ScanClass, scan_classes, scan_gates
from saga.evaluation.score import (
    DocumentScore,
    Gate,
    Limits,
    Totals,
    exact_readable,
    gates,
    score_document,
    totals,
    trusted_strays,
)
from saga.evaluation.truth import ExpectedDocument, TruthError, find_truths, load_truth
from saga.steps.config import StepConfig


class Report(msgspec.Struct, frozen=True, kw_only=True):
    """The whole verdict: per document, the total, the gates."""

    directory: str
    documents: list[DocumentScore]
    total: Totals
    """Over the text documents (``scan`` empty)."""
    gates: list[Gate]
    ok: bool
    scans: list[ScanClass] = []
    """The scanned documents, by how they were scanned (what OCR read)."""


def load_corpus(directory: Path, only: str = "") -> list[ExpectedDocument]:
    """The truth files of ``directory`` (those whose layout contains ``only``)."""
    if not directory.is_dir():
        raise TruthError(
            f"{directory} is not a directory; build one with python -m tests.corpus.build DIR"
        )
    paths = find_truths(directory)
    if not paths:
        raise TruthError(f"{directory} holds no *.truth.json files")
    truths = [load_truth(path) for path in paths]
    chosen = [t for t in truths if only in t.layout]
    if not chosen:
        raise TruthError(f"no layout in {directory} matches {only!r}")
    return chosen


def score_run(truth: ExpectedDocument, run: StepsRun) -> tuple[DocumentScore, int]:
    """One document's score and its exact rows on text pages."""
    output = run.output
    found = output.extraction.biomarkers if output else []
    pairs = match(truth.results, found)
    score = score_document(
        truth,
        pairs,
        review=output.review if output else "",
        coverage=output.extraction.coverage.ratio if output else None,
        error=run.error,
        diagnoses=score_diagnoses(truth.diagnoses, output.extraction.diagnoses if output else []),
    )
    score = msgspec.structs.replace(score, ocr_pages=run.ocr_pages, ocr_cpu_s=run.ocr_cpu_s)
    return score, exact_readable(truth, pairs)


async def evaluate(
    directory: Path, limits: Limits, only: str = "", config: StepConfig | None = None
) -> Report:
    """Run and score every document of the corpus in ``directory``.

    ``config`` is the steps' settings (limits, thresholds); the extractor is always ``rules``.
    """
    scores: list[DocumentScore] = []
    on_text = 0
    strays: list[str] = []
    for truth in load_corpus(directory, only):
        run = await run_pdf(directory / truth.document, config)
        score, exact = score_run(truth, run)
        scores.append(score)
        on_text += 0 if truth.scan else exact
        if truth.scan and run.output is not None:
            found = run.output.extraction.biomarkers
            strays += [truth.layout] * trusted_strays(match(truth.results, found))
    text = [s for s in scores if not s.scan]
    total = totals(text, on_text)
    checks = gates(text, total, limits) if text else []
    classes = scan_classes(scores)
    checks += scan_gates(scores, classes, strays)
    return Report(
        directory=str(directory),
        documents=scores,
        total=total,
        gates=checks,
        ok=all(g.ok for g in checks),
        scans=classes,
    )
