"""Parser: the pages blob in, biomarkers, diagnoses, procedures and genetics out.

The extractor is chosen per deployment (``StepConfig.extractor``): ``rules``
needs no network, ``llm`` goes through the user's model. Whichever ran, the
parser then grounds and checks every result (``saga.steps.vetting``: failures go
to ``rejected`` with their reason), measures coverage (``saga.steps.coverage``)
and sets ``review`` when a person should look: nothing extracted, coverage under
``StepConfig.min_coverage``, rejected values, or pages without text; a value
read by OCR passes its confidence gate (``saga.steps.ocr_gate``) or is rejected
with the page named; with a vision model (``saga.steps.vision``) the OCR'd pages go
to it as pictures, and what it reads must be found in their OCR text. The runtime
loads the pages blob with the claim and deletes it when this step's commit lands.
"""

from __future__ import annotations

from collections.abc import Sequence

import anyio.to_thread
import msgspec
from msgspec.structs import replace

from saga.steps.config import ExtractorKind
from saga.steps.context import StepContext
from saga.steps.coverage import measure, review_reason
from saga.steps.errors import NotFoundError, PayloadTooLargeError
from saga.steps.extract_llm import extract_llm
from saga.steps.extract_rules import extract_rules
from saga.steps.models import Extraction, ParserOutput, RouterOutput
from saga.steps.ocr_gate import gate
from saga.steps.vetting import vet
from saga.steps.vision import page_images


async def parse(ctx: StepContext, inp: RouterOutput) -> ParserOutput:
    """Extract from the staged pages; the output carries the size-bounded extraction."""
    pages = ctx.pages
    if pages is None:
        raise NotFoundError("the pages blob expired; retry from the router")
    if len(pages) != inp.page_count:
        ctx.log.warning(
            "page count differs from the router's", expected=inp.page_count, got=len(pages)
        )
    return await finish(ctx, await _extract(ctx, pages, inp), pages, inp)


async def finish(
    ctx: StepContext, raw: Extraction, pages: list[str], inp: RouterOutput, *, more: str = ""
) -> ParserOutput:
    """What either extractor found, grounded, checked, gated and measured: the parser's
    output (also the chunked pipeline's merge, ``saga.steps.chunk_steps``); ``more``: a
    review reason of the caller's own."""
    extraction = await anyio.to_thread.run_sync(settle, raw, pages)
    extraction, ocr_reasons = gate(extraction, pages, inp.ocr_pages, ctx.config.ocr_min_confidence)
    size = len(msgspec.json.encode(extraction))
    if size > ctx.config.max_output_bytes:
        raise PayloadTooLargeError("extraction size in bytes", size, ctx.config.max_output_bytes)
    review = "; ".join(
        r
        for r in (
            more,
            review_reason(extraction, textless(inp, pages), ctx.config.min_coverage),
            *ocr_reasons,
        )
        if r
    )
    output = ParserOutput.of(extraction, review=review)
    ctx.log.info(
        "document parsed",
        extractor=str(ctx.config.extractor),
        biomarkers=output.biomarker_count,
        diagnoses=output.diagnosis_count,
        procedures=output.procedure_count,
        genetics=output.genetic_count,
        rejected=len(extraction.rejected),
        coverage=round(extraction.coverage.ratio, 3),
        review=bool(review),
        size_bytes=size,
    )
    return output


def textless(inp: RouterOutput, pages: Sequence[str]) -> list[int]:
    """Pages without text: those the router names, and any page that came out empty."""
    blank = {number for number, page in enumerate(pages, start=1) if not page.strip()}
    return sorted(blank | set(inp.textless_pages))


def settle(extraction: Extraction, pages: Sequence[str]) -> Extraction:
    """Ground and check the results of either extractor, then measure coverage."""
    vetted = vet(extraction, pages)
    return replace(vetted, coverage=measure(pages, vetted))


async def _extract(ctx: StepContext, pages: list[str], inp: RouterOutput) -> Extraction:
    if ctx.config.extractor is ExtractorKind.LLM:
        return await extract_llm(ctx, pages, await page_images(ctx, inp))
    # hundreds of pages of regular expressions: keep the event loop free for heartbeats
    return await anyio.to_thread.run_sync(extract_rules, pages)
