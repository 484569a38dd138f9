"""PDF text extraction in a separate process that a step timeout really stops.

A thread cannot be stopped: after a timeout it kept parsing for minutes, holding
a core and hundreds of MB. So the router sends each PDF to a small pool of
extraction processes (anyio's ``to_process``: warm processes are reused, an idle
one lives 5 minutes). When the awaiting task is cancelled (the step's deadline,
a lost lease, a drain) the process is killed with SIGKILL at once, and the next
PDF gets a fresh one. Each process caps its own address space (``RLIMIT_AS``),
so a document that needs too much memory fails with ``MemoryError`` inside it,
never in the worker; at most ``extract_processes`` run per worker. On Linux it
also asks the kernel to kill it when the worker dies (a ``kill -9`` of the
worker leaves no extraction behind).

Cost: the first PDF of a worker pays ~0.4 s to start a process; later ones pay
the pipe, a few ms (measured in docs/documents.md). The job and its answer cross
the pipe pickled (anyio's protocol) between the worker and its own child.
"""

from __future__ import annotations

import os
import signal

import msgspec
from anyio import CancelScope, CapacityLimiter
from anyio.lowlevel import RunVar

from saga.steps.config import StepConfig
from saga.steps.errors import PermanentError, RetryableError
from saga.steps.ocr import image_text
from saga.steps.ocr_engine import single_threaded
from saga.steps.ocr_images import PageImage, page_jpegs
from saga.steps.pages import PdfLimits, PdfText, pdf_text

_LIMITER: RunVar[CapacityLimiter] = RunVar("saga_pdf_extraction")
_PR_SET_PDEATHSIG = 1


class _Job(msgspec.Struct, frozen=True):
    content: bytes
    limits: PdfLimits
    memory_bytes: int
    parent: int
    """The worker's pid: the extraction process exits if it is already gone."""
    image: bool = False
    """A TIFF, PNG or JPEG document: every page is read by OCR."""


async def extract_pdf(content: bytes, config: StepConfig, *, image: bool = False) -> PdfText:
    """``pdf_text`` of ``content`` (or OCR of an image document) in an extraction process,
    killed if this task is cancelled; OCR's ``tesseract`` children die with it."""
    import anyio.to_process
    from anyio import BrokenWorkerProcess

    job = _Job(content, PdfLimits.of(config), config.max_extract_memory_bytes, os.getpid(), image)
    limiter = _limiter(config.extract_processes)
    try:
        # anyio kills a process whose job is cancelled, but not one cancelled while it
        # starts (it lingers outside the pool until its pipes are collected): start one
        # shielded (~0.4 s, once per process), so the cancellable job finds it ready
        with CancelScope(shield=True):
            await anyio.to_process.run_sync(ready, limiter=limiter)
        return await anyio.to_process.run_sync(run_job, job, cancellable=True, limiter=limiter)
    except MemoryError:
        raise PermanentError(
            f"extracting the PDF's text needs more than {config.max_extract_memory_bytes} "
            "bytes of memory (SAGA_MAX_EXTRACT_MEMORY_BYTES)"
        ) from None
    except BrokenWorkerProcess:  # killed from outside (the kernel's OOM killer, an operator)
        raise RetryableError("the PDF extraction process died before it answered") from None


class _RenderJob(msgspec.Struct, frozen=True):
    content: bytes
    pages: list[int]
    image: bool
    max_pages: int
    memory_bytes: int
    parent: int


async def render_pages(
    content: bytes, pages: list[int], config: StepConfig, *, image: bool
) -> list[PageImage]:
    """Pictures of ``pages`` for a vision model (``ocr_images``), drawn in an extraction
    process under the same limits as text extraction and OCR."""
    import anyio.to_process
    from anyio import BrokenWorkerProcess

    job = _RenderJob(
        content, pages, image, config.max_pages, config.max_extract_memory_bytes, os.getpid()
    )
    limiter = _limiter(config.extract_processes)
    try:
        with CancelScope(shield=True):  # as in extract_pdf
            await anyio.to_process.run_sync(ready, limiter=limiter)
        return await anyio.to_process.run_sync(run_render, job, cancellable=True, limiter=limiter)
    except MemoryError:
        raise PermanentError(
            "drawing the scanned pages for the vision model needs more than "
            f"{config.max_extract_memory_bytes} bytes of memory (SAGA_MAX_EXTRACT_MEMORY_BYTES)"
        ) from None
    except BrokenWorkerProcess:
        raise RetryableError("the PDF extraction process died before it answered") from None


def run_render(job: _RenderJob) -> list[PageImage]:
    die_with(job.parent)
    cap_memory(job.memory_bytes)
    return page_jpegs(job.content, job.pages, image=job.image, max_pages=job.max_pages)


def ready() -> bool:
    """A job that only proves the process is up."""
    return True


def run_job(job: _Job) -> PdfText:
    """The extraction process's side: tie its life to the worker's, cap memory, extract."""
    die_with(job.parent)
    cap_memory(job.memory_bytes)
    single_threaded()
    if job.image:
        pages, read = image_text(job.content, max_pages=job.limits.max_pages, limits=job.limits.ocr)
        return PdfText(pages=pages, textless=[p for p, t in enumerate(pages, 1) if not t], ocr=read)
    return pdf_text(job.content, job.limits)


def die_with(parent: int) -> None:
    """Linux: the kernel sends SIGKILL to this process when ``parent`` dies."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):  # not Linux: the pipe's EOF ends an idle process
        return
    if os.getppid() != parent:  # the worker died before the request was taken up
        os._exit(1)


def cap_memory(limit: int) -> None:
    """Lower this process's soft address-space limit to ``limit`` bytes (0: leave it)."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    if limit <= 0 or soft == limit:
        return
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))


def _limiter(size: int) -> CapacityLimiter:
    """One limiter per event loop (a worker's), sized by the latest config."""
    try:
        limiter = _LIMITER.get()
    except LookupError:
        limiter = CapacityLimiter(max(size, 1))
        _LIMITER.set(limiter)
    limiter.total_tokens = max(size, 1)
    return limiter
