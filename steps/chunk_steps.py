"""The parser as a map over chunks (``saga.documents.chunked``): ``chunks`` plans the
requests, ``parse_chunk`` runs one per item (its own attempt, retries and cost row),
``merge`` joins them and does what the parser does after extracting.

- **plan** (router's output in, the pages blob loaded): with the rules extractor, one
  item that stands for the whole document (rules read every page at once, so the
  offline path gives exactly the parser's results); with the LLM, the plan of
  ``saga.steps.extract_llm.plan`` (the token budget, ``SAGA_MAX_PAGES``) as references
  into the pages (``saga.steps.chunk_refs``): no page text in a payload.
- **parse_chunk** (one item; the pages read after its claim): the request's answer
  grounded in the lines it carried (``ground_chunk``: every value on its cited page,
  or rejected). An invalid answer twice is a PermanentError naming the pages, never
  quoting them; a retryable error retries this item only, and an answer the port
  cached is not asked (nor paid) again.
- **merge** (the items' results in item order, the router's output, the pages): results
  repeated across chunks kept once (``combine``), then the parser's checks
  (``saga.steps.parser.finish``). An item that failed for good leaves its pages unread:
  the document is flagged for review, naming them.
"""

from __future__ import annotations

from collections.abc import Sequence

import anyio.to_thread
import msgspec

from saga.steps.chunk_refs import ChunkRef, StaleChunkError, chunk_of, refs_of
from saga.steps.config import ExtractorKind
from saga.steps.context import StepContext
from saga.steps.errors import InvalidInputError, NotFoundError, PermanentError
from saga.steps.extract_llm import ask, combine, configured_llm, ground_chunk, plan
from saga.steps.extract_rules import extract_rules
from saga.steps.models import Extraction, OcrPage, ParserOutput, RouterOutput
from saga.steps.page_layout import uses_decimal_comma
from saga.steps.parser import finish
from saga.steps.vision import page_images

ROUTER = "router"
"""The step whose output ``merge`` reads (``reads=``): what the items do not carry."""
CHUNKS = "plan"
"""The step whose output (the items) ``merge`` reads to name the pages a failed item left."""


class ChunkItem(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One item of the map: a model request by reference, or (no parts) the whole
    document for the rules extractor."""

    chunk: ChunkRef
    document: str = ""
    """For a page sent as a picture: the reference to fetch the document by again."""
    media_type: str = ""


class ChunkResult(msgspec.Struct, frozen=True, kw_only=True):
    """What one item found, grounded (LLM) or as read (rules: ``merge`` checks it)."""

    index: int
    extraction: Extraction


async def plan_items(ctx: StepContext, inp: RouterOutput) -> list[ChunkItem]:
    """The document's requests as map items; PermanentError when the model cannot take it."""
    pages = _pages(ctx)
    if ctx.config.extractor is not ExtractorKind.LLM:
        return [ChunkItem(chunk=ChunkRef(index=0, count=1))]
    llm = configured_llm(ctx)
    planned = await plan(ctx, llm, pages, await page_images(ctx, inp))
    refs = refs_of(planned, pages)
    return [
        ChunkItem(chunk=r, document=inp.document, media_type=inp.media_type)
        if r.picture
        else ChunkItem(chunk=r)
        for r in refs
    ]


async def parse_chunk(ctx: StepContext, item: ChunkItem) -> ChunkResult:
    """One item: the rules over every page, or one model request grounded."""
    pages = _pages(ctx)
    ref = item.chunk
    if not ref.parts:  # the rules extractor: hundreds of pages of regular expressions
        return ChunkResult(index=ref.index, extraction=await anyio.to_thread.run_sync(
            extract_rules, pages))  # fmt: skip
    llm = configured_llm(ctx)
    picture = await _picture(ctx, item) if ref.picture else None
    try:
        chunk = chunk_of(ref, pages, picture)
    except StaleChunkError as exc:
        raise InvalidInputError(f"{exc}; retry the saga from the router") from None
    answer = await ask(ctx, llm, chunk)
    found = ground_chunk(pages, chunk, answer, decimal_comma=uses_decimal_comma(pages))
    ctx.log.info(
        "chunk parsed", chunk=ref.index + 1, of=ref.count, pages=chunk.describe(),
        biomarkers=len(found.biomarkers), rejected=len(found.rejected),
    )  # fmt: skip
    return ChunkResult(index=ref.index, extraction=found)


async def merge(ctx: StepContext, results: Sequence[ChunkResult | None]) -> ParserOutput:
    """The items' results as one extraction, each result once, checked as the parser's."""
    pages = _pages(ctx)
    raw_router = ctx.output_of(ROUTER)
    if not raw_router:
        raise InvalidInputError("merge found no router output; retry the saga from the router")
    inp = msgspec.json.decode(raw_router, type=RouterOutput)
    done = [r for r in results if r is not None]
    raw = done[0].extraction if len(results) == 1 and done else combine(
        r.extraction for r in sorted(done, key=lambda r: r.index))  # fmt: skip
    missing = [i for i, r in enumerate(results) if r is None]
    return await finish(ctx, raw, pages, inp, more=_unread(ctx, missing))


def _unread(ctx: StepContext, missing: Sequence[int]) -> str:
    """The review reason for items that failed for good: which pages went unread."""
    if not missing:
        return ""
    items = msgspec.json.decode(ctx.output_of(CHUNKS) or b"[]", type=list[ChunkItem])
    pages = sorted({p.page for i in missing if i < len(items) for p in items[i].chunk.parts})
    named = ", ".join(str(p) for p in pages) or "unknown"
    return f"{len(missing)} of {len(items) or '?'} model requests failed; pages not read: {named}"


async def _picture(ctx: StepContext, item: ChunkItem) -> object:
    """The page's picture again (vision); PermanentError when it can no longer be drawn."""
    page = item.chunk.picture
    ocr = [OcrPage(page=page, confidence="")]
    inp = RouterOutput(document_name="", media_type=item.media_type, page_count=page,
                       ocr_pages=ocr, document=item.document)  # fmt: skip
    images = await page_images(ctx, inp)
    if page not in images:
        raise PermanentError(f"page {page} could not be drawn again for the vision model")
    return images[page]


def _pages(ctx: StepContext) -> list[str]:
    pages = ctx.pages
    if pages is None:
        raise NotFoundError("the pages blob expired; retry from the router")
    return pages
