"""PDF text extraction in a separate process that a step timeout really stops.

A thread cannot be stopped: after a timeout it kept parsing for minutes, holding
a core and hundreds of MB. So the router sends each PDF to a small pool of
extraction processes (anyio's ``to_process``: warm processes are reused, an idle
one lives 5 minutes). When the awaiting task is cancelled (the step's deadline,
a lost lease, a drain) the process is killed with SIGKILL at once, and the next
PDF gets a fresh one. Each process caps its own address space (``RLIMIT_AS``),
so a document that needs too much memory fails with ``MemoryError`` inside it,
never in the worker; at most ``extract_processes`` run per worker.

Cost: the first PDF of a worker pays ~0.3 s to start a process; later ones pay
the pipe (measured in docs/extraction-limits.md).
"""

from __future__ import annotations

import msgspec
from anyio import CapacityLimiter
from anyio.lowlevel import RunVar

from saga.steps.config import StepConfig
from saga.steps.errors import PermanentError, RetryableError
from saga.steps.pages import PdfLimits, PdfText, pdf_text

_LIMITER: RunVar[CapacityLimiter] = RunVar("saga_pdf_extraction")


class _Job(msgspec.Struct, frozen=True):
    content: bytes
    limits: PdfLimits
    memory_bytes: int


async def extract_pdf(content: bytes, config: StepConfig) -> PdfText:
    """``pdf_text`` of ``content`` in an extraction process, killed if this task is cancelled."""
    import anyio.to_process
    from anyio import BrokenWorkerProcess

    job = _Job(content, PdfLimits.of(config), config.max_extract_memory_bytes)
    try:
        return await anyio.to_process.run_sync(
            run_job, job, cancellable=True, limiter=_limiter(config.extract_processes)
        )
    except MemoryError:
        raise PermanentError(
            f"extracting the PDF's text needs more than {config.max_extract_memory_bytes} "
            "bytes of memory (SAGA_MAX_EXTRACT_MEMORY_BYTES)"
        ) from None
    except BrokenWorkerProcess:  # killed from outside (the kernel's OOM killer, an operator)
        raise RetryableError("the PDF extraction process died before it answered") from None


def run_job(job: _Job) -> PdfText:
    """The extraction process's side: cap memory, then extract."""
    cap_memory(job.memory_bytes)
    return pdf_text(job.content, job.limits)


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
