"""The chunked pipeline's offline path (saga.steps.chunk_steps: plan -> parse_chunk ->
merge, with the rules extractor) gives the one-step parser's output byte for byte on
every corpus layout (the brief's bar: ``saga eval`` must not move)."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from saga.evaluation.truth import find_truths, load_truth
from saga.steps.context import Document
from saga.steps.models import RouterInput
from saga.steps.parser import parse
from saga.steps.router import route
from saga.steps.testing import MemoryDocuments, make_context
from tests.steps.chunk_support import chunked


@pytest.mark.anyio
async def test_the_offline_map_equals_the_parser_on_every_layout(corpus_dir: Path) -> None:
    """Every layout: the router's pages through plan -> parse_chunk -> merge give exactly
    the bytes the parser gives."""
    differ, seen = [], 0
    for path in find_truths(corpus_dir):
        truth = load_truth(path)
        pdf = (corpus_dir / truth.document).read_bytes()
        docs = MemoryDocuments({"d": Document(truth.document, "application/pdf", pdf)})
        router_ctx = make_context(step="router", documents=docs)
        inp = await route(router_ctx, RouterInput(document="d"))
        pages = router_ctx.stored_pages[-1]
        one_step = await parse(make_context(step="parser", pages=pages), inp)
        if msgspec.json.encode(await chunked(pages, inp)) != msgspec.json.encode(one_step):
            differ.append(truth.document)
        seen += 1
    assert seen >= 30 and differ == []
