"""Run one corpus document (a PDF, or a TIFF, PNG or JPEG scan) through the steps.

The same functions the workers run, with a hand-built context instead of the
runtime: ``route`` splits the PDF into page texts (and stages them), ``parse``
extracts with the configured extractor and applies the parser's checks and
review rules. No Redis, no network.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from pathlib import Path
from typing import Any

import anyio
import msgspec
import structlog

from saga.steps.config import ExtractorKind, StepConfig
from saga.steps.context import Document
from saga.steps.errors import StepError
from saga.steps.models import ParserOutput, RouterInput
from saga.steps.parser import parse
from saga.steps.router import route
from saga.steps.testing import MemoryDocuments, as_step_context, make_context


def _drop(_logger: Any, _method: str, _event: MutableMapping[str, Any]) -> Mapping[str, Any]:
    raise structlog.DropEvent


# the steps log each document at info level; the report says what matters
_QUIET = structlog.wrap_logger(structlog.PrintLogger(), processors=[_drop])


class StepsRun(msgspec.Struct, frozen=True, kw_only=True):
    """What the steps made of one document: the parser's output, or the error that stopped it."""

    output: ParserOutput | None = None
    error: str = ""
    ocr_pages: int = 0
    ocr_cpu_s: float = 0.0
    """CPU seconds of OCR over the document (the extraction process and its tesseracts)."""


MEDIA_TYPES = {
    ".pdf": "application/pdf",
    ".tif": "image/tiff",
    ".tiff": "image/tiff",
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
}


async def run_pdf(path: Path, config: StepConfig | None = None) -> StepsRun:
    """Route then parse ``path`` as a worker would; an error is returned, not raised."""
    # the rules extractor always: the LLM one needs a user's key and costs money per run
    config = msgspec.structs.replace(config or StepConfig(), extractor=ExtractorKind.RULES)
    ref = path.name
    content = await anyio.Path(path).read_bytes()
    media_type = MEDIA_TYPES.get(path.suffix.lower(), "application/pdf")
    documents = MemoryDocuments({ref: Document(ref, media_type, content)})
    router_ctx = make_context(
        step="router", record_id=path.stem, documents=documents, config=config, log=_QUIET
    )
    try:
        routed = await route(as_step_context(router_ctx), RouterInput(document=ref))
        parser_ctx = make_context(
            step="parser",
            record_id=path.stem,
            pages=router_ctx.stored_pages[-1],
            config=config,
            log=_QUIET,
        )
        output = await parse(as_step_context(parser_ctx), routed)
    except StepError as exc:
        return StepsRun(error=f"{type(exc).__name__}: {exc}")
    except Exception as exc:
        # a worker would retry this and then dead-letter it: the saga does not complete.
        # Score the other documents and show it rather than stop the whole evaluation.
        return StepsRun(error=f"unexpected {type(exc).__name__}: {str(exc)[:200]}")
    ocr = routed.ocr_pages
    return StepsRun(
        output=output, ocr_pages=len(ocr), ocr_cpu_s=round(sum(p.cpu_s for p in ocr), 3)
    )
