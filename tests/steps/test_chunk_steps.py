"""The parser as a map over chunks (saga.steps.chunk_steps, chunk_refs), step by step with
hand-built contexts: the plan carries no page text and rebuilds every chunk exactly; plan ->
parse_chunk per item -> merge gives the one-step parser's output (rules: identical bytes;
LLM: the same results, each once); a failed item flags the pages it left unread."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import pytest

from saga.steps import chunk_steps
from saga.steps.chunk_refs import ChunkRef, StaleChunkError, chunk_of, refs_of
from saga.steps.chunking import plan_chunks
from saga.steps.config import ExtractorKind, StepConfig
from saga.steps.context import Completion, Document, Tokenizer
from saga.steps.errors import PermanentError
from saga.steps.models import RouterInput, RouterOutput
from saga.steps.parser import parse
from saga.steps.router import route
from saga.steps.testing import MemoryDocuments, make_context
from tests.steps.chunk_support import answer_json, chunked, ctx, row_pages

pytestmark = pytest.mark.anyio

SAMPLES = Path(__file__).resolve().parents[2] / "saga" / "samples"
LLM_CONFIG = StepConfig(extractor=ExtractorKind.LLM)


def count(text: str) -> int:
    return len(text) // 4 + 1


@dataclass
class ReadingLLM:
    """Answers each request with every ``Name  value unit`` row it carries, on the page of
    the marker above it, and the same diagnosis in every request (a repeat across chunks)."""

    window: int = 3_000
    model: str = "reading"
    asked: list[str] = field(default_factory=list)
    broken: str = ""
    """A page marker whose request is answered with no JSON (twice: a PermanentError)."""

    async def complete(self, messages: Any, *, purpose: str, json_mode: bool = True) -> Completion:
        text = str(messages[1]["content"]) if purpose == "extract" else ""
        self.asked.append(purpose)
        if self.broken and (self.broken in text or purpose != "extract"):
            return Completion(text="not json", model=self.model)
        return Completion(text=answer_json(text), model=self.model)

    async def tokenizer(self) -> Tokenizer:
        return Tokenizer(self.window, 750, count)


def pages_of_rows(n: int, per_page: int = 12) -> list[str]:
    return ["\n".join(page) for page in row_pages(n, per_page)]


def routed(pages: list[str]) -> RouterOutput:
    return RouterOutput(document_name="doc.txt", media_type="text/plain", page_count=len(pages))


def test_the_plan_names_ranges_and_rebuilds_every_chunk_exactly() -> None:
    """Whole pages, a page cut at line ends and a line cut at spaces: every ChunkRef, as
    JSON, holds no page text and gives back the planned chunk, text and lines."""
    long_line = " ".join(f"word{i}" for i in range(400))
    pages = [*pages_of_rows(3), "\n".join([long_line, *pages_of_rows(1, 60)[0].split("\n")]), ""]
    chunks = plan_chunks(pages, count, 300)
    assert len(chunks) > 4 and any(p.parts > 1 for c in chunks for p in c.parts)
    refs = refs_of(chunks, pages)
    wire = msgspec.json.encode(refs)
    assert b"word1" not in wire and b"Analyte" not in wire
    back = msgspec.json.decode(wire, type=list[ChunkRef])
    assert [chunk_of(r, pages) for r in back] == chunks
    assert [r.index for r in back] == list(range(len(chunks)))
    assert {r.count for r in back} == {len(chunks)}


def test_a_changed_page_is_refused_not_misread() -> None:
    """Pages that no longer hold the planned text: StaleChunkError, never another chunk."""
    pages = pages_of_rows(2)
    ref = refs_of(plan_chunks(pages, count, 10_000), pages)[0]
    with pytest.raises(StaleChunkError):
        chunk_of(ref, ["", ""])
    with pytest.raises(StaleChunkError):
        chunk_of(ref, pages[:1])


@pytest.mark.parametrize("name", ["annual_panel", "wellness_colon", "thyroid_pipe"])
async def test_the_offline_path_gives_the_parsers_exact_output(name: str) -> None:
    """SAGA_PARSER=rules: one item for the whole document; merge's output is the parser's,
    byte for byte."""
    pdf = Document(f"{name}.pdf", "application/pdf", (SAMPLES / f"{name}.pdf").read_bytes())
    router_ctx = make_context(step="router", documents=MemoryDocuments({"doc": pdf}))
    inp = await route(router_ctx, RouterInput(document="doc"))
    pages = router_ctx.stored_pages[-1]
    items = await chunk_steps.plan_items(ctx(pages), inp)
    assert len(items) == 1 and not items[0].chunk.parts
    one_step = await parse(make_context(step="parser", pages=pages), inp)
    assert msgspec.json.encode(await chunked(pages, inp)) == msgspec.json.encode(one_step)
    assert one_step.biomarker_count > 5


async def test_a_long_document_is_many_items_with_every_value_once() -> None:
    """Twelve pages over a small window: several items, each one request; every row found
    once, grounded on its own page; the diagnosis every request repeats kept once; the
    result equals the one-step LLM parser's."""
    pages = pages_of_rows(12)
    pages[5] = "\n".join([pages[5]] * 3)  # a page with its rows thrice: cut across requests
    llm = ReadingLLM()
    items = await chunk_steps.plan_items(ctx(pages, llm), routed(pages))
    assert len(items) >= 6
    assert len([i for i in items if 6 in {p.page for p in i.chunk.parts}]) >= 2
    each = [await chunk_steps.parse_chunk(ctx(pages, llm), i) for i in items]
    assert sum(len(r.extraction.biomarkers) for r in each) > 12 * 12  # the repeats
    out = await chunked(pages, routed(pages), ReadingLLM())
    one_step = await parse(make_context(step="parser", pages=pages, config=LLM_CONFIG,
                                        llm=ReadingLLM()), routed(pages))  # fmt: skip
    assert out == one_step
    found = out.extraction.biomarkers
    assert len(found) == 12 * 12
    assert all(b.provenance and b.provenance.page for b in found)
    assert {(b.name, b.provenance.page) for b in found if b.provenance} == {
        (f"Analyte {chr(65 + p)}{r}", p + 1) for p in range(12) for r in range(12)
    }
    assert len(out.extraction.diagnoses) == 1


async def test_an_item_that_failed_for_good_flags_its_pages() -> None:
    """A request whose answer is invalid twice is a PermanentError naming its pages, never
    quoting them; merge, given None for it (on_failure=partial), flags those pages."""
    pages = pages_of_rows(6)
    items = await chunk_steps.plan_items(ctx(pages, ReadingLLM()), routed(pages))
    broken = items[1]
    with pytest.raises(PermanentError, match=r"page") as err:
        await chunk_steps.parse_chunk(ctx(pages, ReadingLLM(broken="=== page")), broken)
    assert "Analyte" not in str(err.value) and "not json" not in str(err.value)
    results: list[Any] = [await chunk_steps.parse_chunk(ctx(pages, ReadingLLM()), i) for i in items]
    results[1] = None
    stored = msgspec.json.encode(items)
    merged = ctx(pages, ReadingLLM(), router=msgspec.json.encode(routed(pages)), plan=stored)
    out = await chunk_steps.merge(merged, results)
    unread = sorted({p.page for p in broken.chunk.parts})
    assert f"pages not read: {', '.join(map(str, unread))}" in out.review
    assert out.biomarker_count < 6 * 12
