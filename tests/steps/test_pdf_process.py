"""PDF extraction runs in a process of its own: cancelling stops it, its memory is capped."""

from __future__ import annotations

import time

import anyio
import psutil
import pytest

from saga.steps.config import StepConfig
from saga.steps.errors import PayloadTooLargeError, PermanentError
from saga.steps.pdf_process import extract_pdf
from tests.executor.support import wait_until
from tests.steps.odd_pdfs import shared_stream_pdf
from tests.steps.pdfgen import make_pdf

pytestmark = pytest.mark.anyio

UNLIMITED = {"max_page_content_bytes": 10**12, "max_content_bytes": 10**12}


def _children() -> list[psutil.Process]:
    return psutil.Process().children(recursive=True)


async def test_cancelling_kills_the_extraction_within_a_second() -> None:
    """A step cancelled mid-extraction (its timeout) leaves no process burning CPU or
    holding memory: the extraction process is gone within a second."""
    slow = shared_stream_pdf(pages=200, stream_bytes=1_000_000)  # minutes of work
    await extract_pdf(make_pdf([["warm"]]), StepConfig())  # a started process does it
    busy: list[psutil.Process] = []

    async def extraction_running() -> bool:
        busy[:] = [p for p in _children() if p.cpu_percent(0.05) > 20]
        return bool(busy)

    with anyio.move_on_after(30) as scope:
        async with anyio.create_task_group() as tg:
            tg.start_soon(extract_pdf, slow, StepConfig(**UNLIMITED))
            await wait_until(extraction_running, within=20, what="the extraction to burn CPU")
            tg.cancel_scope.cancel()
            cancelled = time.monotonic()
    assert not scope.cancelled_caught, "the extraction did not start"

    async def gone() -> bool:
        return not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in busy)

    await wait_until(gone, within=1.0, what="the extraction process to be killed")
    assert time.monotonic() - cancelled < 1.0


async def test_the_next_document_after_a_kill_is_extracted() -> None:
    """After a killed extraction the pool starts a fresh process for the next PDF."""
    with anyio.move_on_after(1):
        await extract_pdf(shared_stream_pdf(200, 1_000_000), StepConfig(**UNLIMITED))
    text = await extract_pdf(make_pdf([["Ferritin  80  ng/mL"]]), StepConfig())
    assert text.pages == ["Ferritin  80  ng/mL"]


async def test_a_warm_process_serves_the_next_documents() -> None:
    """Small PDFs reuse one warm extraction process (no start-up per document)."""
    pdf = make_pdf([["Sodium  140  mmol/L"]])
    before = {p.pid for p in _children()}
    await extract_pdf(pdf, StepConfig())
    first = {p.pid for p in _children()} - before
    for _ in range(3):
        await extract_pdf(pdf, StepConfig())
    assert {p.pid for p in _children()} - before == first and len(first) == 1


async def test_memory_over_the_cap_is_a_permanent_error_naming_the_setting() -> None:
    """A PDF that needs more memory than SAGA_MAX_EXTRACT_MEMORY_BYTES fails inside the
    extraction process with a permanent error; the worker's own memory is untouched."""
    greedy = shared_stream_pdf(pages=1, stream_bytes=70_000_000)  # 70 MB inflated at once
    rss = psutil.Process().memory_info().rss
    config = StepConfig(max_extract_memory_bytes=120 * 1024 * 1024, **UNLIMITED)
    with pytest.raises(PermanentError, match="SAGA_MAX_EXTRACT_MEMORY_BYTES"):
        await extract_pdf(greedy, config)
    assert psutil.Process().memory_info().rss - rss < 30 * 1024 * 1024


async def test_limit_errors_cross_the_process_boundary_intact() -> None:
    """A PayloadTooLargeError raised in the extraction process keeps what, value and limit."""
    with pytest.raises(PayloadTooLargeError) as caught:
        await extract_pdf(make_pdf([["a"], ["b"], ["c"]]), StepConfig(max_pages=2))
    assert (caught.value.what, caught.value.value, caught.value.limit) == ("page count", 3, 2)
