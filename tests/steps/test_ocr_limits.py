"""OCR's limits: a 10-page 200 dpi scan read in the extraction process on one core within
the router's default timeout, while the worker's event loop stays free (what keeps
``/readyz`` answering), and its CPU seconds per page measured.

Real Tesseract (skipped, with the reason, where it is not installed)."""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Iterator

import anyio
import pytest

from saga.api.pipeline import StepSpec
from saga.steps.config import StepConfig
from saga.steps.pdf_process import extract_pdf
from tests.corpus import layouts_us
from tests.corpus.scanner import SCAN_200, image_pdf, render, spoil
from tests.ocr_marks import needs_tesseract

pytestmark = [
    pytest.mark.anyio,
    needs_tesseract("eng+deu+fra"),
]

PAGES = 10
LOOP_STALL_S = 1.0
"""The longest the event loop may go without running a ready task (a /readyz answer)."""


@pytest.fixture
def one_core() -> Iterator[None]:
    """This process and the extraction processes and tesseracts it starts, on one CPU."""
    if not hasattr(os, "sched_setaffinity"):
        pytest.skip("CPU affinity is Linux only")
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(before)})
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


def _ten_page_scan() -> bytes:
    pdf, _ = layouts_us.quest_style()
    pages = render(pdf, SCAN_200)
    pictures = [spoil(pages[i % len(pages)], SCAN_200, seed=40 + i) for i in range(PAGES)]
    return image_pdf(pictures, SCAN_200)


@pytest.mark.usefixtures("one_core")
async def test_a_ten_page_scan_is_read_on_one_core_within_the_timeout_with_the_loop_free() -> None:
    content = _ten_page_scan()
    config = StepConfig(ocr=True, ocr_concurrency=2)
    # the router declares no timeout of its own: the StepSpec default
    timeout = float(next(f.default for f in dataclasses.fields(StepSpec) if f.name == "timeout_s"))  # type: ignore[arg-type]
    stalls: list[float] = []
    done = anyio.Event()

    async def ticker() -> None:
        last = time.monotonic()
        while not done.is_set():
            await anyio.sleep(0.05)
            now = time.monotonic()
            stalls.append(now - last - 0.05)
            last = now

    started = time.monotonic()
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(ticker)
        with anyio.fail_after(timeout):
            text = await extract_pdf(content, config)
        done.set()
    elapsed = time.monotonic() - started
    assert len(text.ocr) == PAGES, f"{len(text.ocr)} of {PAGES} pages read"
    assert all("GLUCOSE" in text.pages[p - 1] or p % 2 == 0 for p in range(1, PAGES + 1))
    cpu = [page.cpu_s for page in text.ocr]
    assert all(c > 0 for c in cpu)
    assert max(stalls) < LOOP_STALL_S, f"the event loop stalled {max(stalls):.2f} s"
    print(f"10 pages in {elapsed:.1f} s wall on one core, {cpu[0]:.2f} s CPU per page")
