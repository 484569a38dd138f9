"""The document pipeline with the parser as a map over chunks, type ``documents``:
``router → plan → parse_chunk (a map: one attempt per model request) → merge → grouper``.

Opt in with ``SAGA_PIPELINE=saga.documents.chunked:app`` (docs/documents.md, "Long
documents as a map"); the default pipeline (``saga.documents.pipeline``) keeps its
``parser`` step. The steps are ``saga.steps.chunk_steps``: ``plan`` returns page ranges
(never page text); each item reads the pages blob after its claim; ``merge`` reads the
router's output and the pages, and its commit deletes the blob. A request that fails for
good (its retries spent) leaves its pages unread and the document flagged for review
(``on_failure="partial"``). ``SAGA_PARSE_CHUNK_MAP_CONCURRENCY`` sets how many of one
document's requests run at once (default 4), ``SAGA_PARSE_CHUNK_*`` the rest.
"""

from __future__ import annotations

from saga.api.app import App
from saga.api.app_maps import MapResults
from saga.state.keys import DEFAULT_TYPE
from saga.steps import chunk_steps
from saga.steps.chunk_steps import ChunkItem, ChunkResult
from saga.steps.context import StepContext
from saga.steps.grouper import group
from saga.steps.models import GrouperOutput, ParserOutput, RouterInput, RouterOutput
from saga.steps.router import route

app = App(DEFAULT_TYPE)


@app.step(name="router", timeout=120, lease=60, concurrency=8, retries=4, calls_models=False)
async def router(ctx: StepContext, inp: RouterInput) -> RouterOutput:
    return await route(ctx, inp)


@app.step(name="plan", after=router, timeout=120, lease=60, concurrency=8, retries=4,
          loads_pages=True)  # fmt: skip
async def plan(ctx: StepContext, inp: RouterOutput) -> list[ChunkItem]:
    return await chunk_steps.plan_items(ctx, inp)


@app.map(over=plan, name="parse_chunk", concurrency=4, on_failure="partial", retries=4,
         timeout=300, lease=60, loads_pages=True)  # fmt: skip
async def parse_chunk(ctx: StepContext, item: ChunkItem) -> ChunkResult:
    return await chunk_steps.parse_chunk(ctx, item)


@app.step(name="merge", after=parse_chunk, timeout=300, lease=60, concurrency=4, retries=4,
          loads_pages=True, deletes_pages=True, reads=("router", "plan"),
          calls_models=False)  # fmt: skip
async def merge(ctx: StepContext, results: MapResults[ChunkResult]) -> ParserOutput:
    return await chunk_steps.merge(ctx, results.results)


@app.step(name="grouper", after=merge, timeout=300, lease=60, concurrency=8, retries=4)
async def grouper(ctx: StepContext, inp: ParserOutput) -> GrouperOutput:
    return await group(ctx, inp)
