"""The shipped sample reports: each meets its expected extraction exactly, through the steps."""

from __future__ import annotations

from pathlib import Path

import pytest

from saga.adapters.documents import DocumentFetcher
from saga.samples import Sample, list_samples, load_expected
from saga.steps.errors import InvalidInputError
from saga.steps.grouper import group
from saga.steps.models import Extraction, ParserOutput, RouterInput
from saga.steps.parser import parse
from saga.steps.router import route
from saga.steps.testing import make_context
from tests.steps.compare import core
from tests.steps.conftest import local_policy
from tests.steps.make_samples import write_samples
from tests.steps.pdfgen import expected_extraction
from tests.steps.sample_reports import BROKEN_NAME, GOOD_REPORTS

SAMPLES = list_samples()
GOOD = [s for s in SAMPLES if not s.fails_at]


async def run_router_and_parser(path: Path) -> Extraction:
    """Route a file from disk, then parse the pages the router staged."""
    async with DocumentFetcher(max_bytes=1_000_000, policy=local_policy(path.parent)) as fetcher:
        ctx = make_context(documents=fetcher)
        routed = await route(ctx, RouterInput(document=str(path)))
    parsed = await parse(make_context(step="parser", pages=ctx.stored_pages[-1]), routed)
    return parsed.extraction


def test_every_report_ships_with_its_expected_extraction() -> None:
    """Five samples: four with expected JSON and one that fails at the router."""
    assert sorted(s.name for s in GOOD) == sorted(r.name for r in GOOD_REPORTS)
    assert [(s.name, s.fails_at, s.expected_path) for s in SAMPLES if s.fails_at] == [
        (BROKEN_NAME, "router", None)
    ]
    assert all(s.path.is_file() and s.record_id.startswith("sample-") for s in SAMPLES)


@pytest.mark.anyio
@pytest.mark.parametrize("sample", GOOD, ids=[s.name for s in GOOD])
async def test_shipped_sample_meets_its_expected_extraction(sample: Sample) -> None:
    """Router + rules parser on the shipped PDF yield exactly the shipped expected JSON."""
    expected = load_expected(sample)
    assert expected is not None and expected.biomarkers
    assert await run_router_and_parser(sample.path) == expected


@pytest.mark.anyio
async def test_broken_sample_is_refused_by_the_router() -> None:
    """The scan without a text layer dead-letters at the router as invalid input."""
    broken = next(s for s in SAMPLES if s.fails_at)
    with pytest.raises(InvalidInputError, match="no extractable text"):
        await run_router_and_parser(broken.path)


@pytest.mark.anyio
async def test_regenerated_samples_still_extract_as_expected(tmp_path: Path) -> None:
    """The generator's fresh PDFs extract to the data's truth, equal to the shipped JSON."""
    write_samples(tmp_path)
    shipped = {s.name: s for s in GOOD}
    for report in GOOD_REPORTS:
        truth = expected_extraction(report)
        assert core(await run_router_and_parser(tmp_path / f"{report.name}.pdf")) == truth
        shipped_truth = load_expected(shipped[report.name])
        assert shipped_truth is not None and core(shipped_truth) == truth, report.name


@pytest.mark.anyio
async def test_followup_sample_groups_the_hba1c_family() -> None:
    """In the follow-up report, three HbA1c spellings form one group; haemoglobin stays apart."""
    sample = next(s for s in GOOD if s.name == "followup_mixed")
    extraction = load_expected(sample)
    assert extraction is not None
    out = await group(make_context(step="grouper"), ParserOutput.of(extraction))
    groups = {g.canonical_name: g.members for g in out.groups}
    assert groups["Hemoglobin A1c"] == ["Glycated haemoglobin", "HbA1c", "A1C"]
    assert groups["Hemoglobin"] == ["Haemoglobin"]
    assert groups["Total cholesterol"] == ["Cholestrol total"]
