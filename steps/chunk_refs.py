"""A chunk plan as small payloads: where each request's text lies in the pages, never
the text itself (``saga.steps.chunking`` plans ``Chunk``s that carry it).

A map over chunks (one attempt per request) stores its items in the saga and sends the
whole list with every item's claim, so an item names its parts by page, line range and
the characters of the page text they cover; the item's attempt rebuilds the ``Chunk``
from the pages blob (``chunk_of``), exactly, or refuses a blob that no longer matches.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from saga.steps.chunking import Chunk, PagePart


class PartRef(msgspec.Struct, frozen=True, array_like=True):
    """One part of a page: lines ``first``..``end`` and characters ``start``..``stop``
    of the page's text (a cut of one long line is a substring of that line)."""

    page: int
    first: int
    end: int
    start: int
    stop: int
    tokens: int
    part: int = 1
    parts: int = 1


class ChunkRef(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One model request of a document: its parts, or its page sent as a picture."""

    index: int
    """0-based, in document order."""
    count: int
    """Requests the document needs."""
    parts: list[PartRef] = []
    picture: int = 0
    """The page (1-based) sent as its picture instead of its text (vision); 0: none."""


class StaleChunkError(ValueError):
    """The pages no longer hold the text a chunk was planned on."""


def refs_of(chunks: Sequence[Chunk], pages: Sequence[str]) -> list[ChunkRef]:
    """The plan as references into ``pages``; ``chunk_of`` rebuilds each chunk."""
    count = len(chunks)
    out = []
    for index, chunk in enumerate(chunks):
        if chunk.picture is not None:
            (part,) = chunk.parts
            ref = PartRef(part.page, part.first, part.end, 0, 0, part.tokens)
            out.append(ChunkRef(index=index, count=count, parts=[ref], picture=part.page))
            continue
        parts = [_ref(part, pages[part.page - 1]) for part in chunk.parts]
        out.append(ChunkRef(index=index, count=count, parts=parts))
    return out


def chunk_of(ref: ChunkRef, pages: Sequence[str], picture: object = None) -> Chunk:
    """The chunk ``ref`` names, its text taken from ``pages`` (``picture``: the page's
    image, for a chunk sent as one); StaleChunkError when the pages do not hold it."""
    parts = []
    for p in ref.parts:
        if not 1 <= p.page <= len(pages):
            raise StaleChunkError(f"chunk {ref.index + 1} names page {p.page} of {len(pages)}")
        text = "" if ref.picture else pages[p.page - 1][p.start : p.stop]
        if not ref.picture and (p.stop > len(pages[p.page - 1]) or not text.strip()):
            raise StaleChunkError(f"chunk {ref.index + 1} no longer matches page {p.page}")
        parts.append(PagePart(p.page, p.first, p.end, text, p.tokens, p.part, p.parts))
    return Chunk(tuple(parts), picture=picture)


def _ref(part: PagePart, page: str) -> PartRef:
    """Where ``part.text`` starts in its page: at or after its first line."""
    line_start = sum(len(line) + 1 for line in page.split("\n")[: part.first])
    start = page.find(part.text, line_start)
    if start < 0:  # planned from these very pages: cannot happen
        raise StaleChunkError(f"a part of page {part.page} is not in its text")
    return PartRef(part.page, part.first, part.end, start, start + len(part.text),
                   part.tokens, part.part, part.parts)  # fmt: skip
