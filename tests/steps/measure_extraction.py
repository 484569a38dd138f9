"""Figures for docs/documents.md: what the extraction process costs a small PDF.

    python -m tests.steps.measure_extraction

Prints the first PDF of a worker (a process starts), a warm PDF (median of 50) and the
same extraction in the worker's own process (what the thread used to cost), then the
time to refuse a decompression bomb.
"""

from __future__ import annotations

import statistics
import time

import anyio

RUNS = 50


async def main() -> None:
    # imported here: an extraction process re-runs this module's top level (as anyio's
    # process pool does with __main__), which in a worker is the light CLI entry point
    from saga.samples import list_samples
    from saga.steps.config import StepConfig
    from saga.steps.errors import PayloadTooLargeError
    from saga.steps.pages import PdfLimits, pdf_text
    from saga.steps.pdf_process import extract_pdf
    from tests.steps.odd_pdfs import shared_stream_pdf

    sample = next(s for s in list_samples() if s.name == "annual_panel")
    pdf, config = sample.path.read_bytes(), StepConfig()
    started = time.perf_counter()
    await extract_pdf(pdf, config)
    cold = time.perf_counter() - started
    warm = []
    for _ in range(RUNS):
        started = time.perf_counter()
        await extract_pdf(pdf, config)
        warm.append(time.perf_counter() - started)
    local = []
    for _ in range(RUNS):
        started = time.perf_counter()
        pdf_text(pdf, PdfLimits.of(config))
        local.append(time.perf_counter() - started)
    bomb = shared_stream_pdf(pages=3, stream_bytes=4_600_000)
    started = time.perf_counter()
    try:
        await extract_pdf(bomb, config)
    except PayloadTooLargeError:
        refused = time.perf_counter() - started
    print(f"{sample.name}.pdf ({len(pdf)} bytes, 2 pages), median of {RUNS}:")
    print(f"  first PDF of a worker (process start)  {cold * 1000:7.1f} ms")
    print(f"  warm extraction process                {statistics.median(warm) * 1000:7.1f} ms")
    print(f"  in the worker's process (old thread)   {statistics.median(local) * 1000:7.1f} ms")
    print(f"{len(bomb)}-byte bomb (3 pages x 4.6 MB) refused in {refused * 1000:.1f} ms")


if __name__ == "__main__":
    anyio.run(main)
