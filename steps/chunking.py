"""Pages into model requests under a token budget: pure functions, table-tested.

``page_budget`` turns the model's window into the tokens of page text one request
may carry, after the prompt and the room its answer needs. ``plan_chunks`` packs
whole pages, in order, into as few requests as fit; a page larger than the budget
is cut at line ends into parts (a line larger than the budget at a space near its
middle). Every part remembers which lines of its page it holds, so a value the
model cites can be looked up in exactly the text the model saw.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

Count = Callable[[str], int]

ANSWER_TOKENS_PER_PAGE_TOKEN = 3
"""A lab line of ~20 tokens comes back as a JSON result of ~60 that quotes the line:
a request carries at most a third of its answer room in page text, so the answer
fits the model's output limit."""

SAFETY = 0.9
"""Token counts of non-OpenAI models are estimates: plan within 90% of the window."""

MARKER_TOKENS = 16
"""Tokens of a part's marker line (``=== page 12 (part 2 of 3) ===``) and its newlines."""


class NoRoomError(ValueError):
    """The model's window leaves no room for page text after the prompt and the answer."""


@dataclass(frozen=True, slots=True)
class Budget:
    """What one request may hold, in tokens."""

    pages: int
    """Page text (markers included) per request."""
    answer: int
    """Room left for the answer."""


def page_budget(max_input_tokens: int, max_output_tokens: int, prompt_tokens: int) -> Budget:
    """Tokens of page text a request may carry; NoRoomError when none are left."""
    answer = min(max_output_tokens, max_input_tokens // 2)
    room = int(max_input_tokens * SAFETY) - prompt_tokens - answer
    pages = min(room, answer // ANSWER_TOKENS_PER_PAGE_TOKEN)
    if pages < 2 * MARKER_TOKENS:
        raise NoRoomError(
            f"a window of {max_input_tokens} tokens leaves no room for page text after the "
            f"prompt ({prompt_tokens} tokens) and the answer ({answer} tokens)"
        )
    return Budget(pages=pages, answer=answer)


@dataclass(frozen=True, slots=True)
class PagePart:
    """Lines ``first``..``end`` (exclusive) of a page, or a piece of one long line."""

    page: int
    """1-based page number."""
    first: int
    end: int
    text: str
    tokens: int
    part: int = 1
    parts: int = 1

    @property
    def marker(self) -> str:
        if self.parts == 1:
            return f"=== page {self.page} ==="
        return f"=== page {self.page} (part {self.part} of {self.parts}) ==="


@dataclass(frozen=True, slots=True)
class Chunk:
    """The parts one request carries, in document order."""

    parts: tuple[PagePart, ...]
    picture: Any = None
    """The page's picture (``ocr_images.PageImage``) sent instead of its text (vision)."""

    @property
    def tokens(self) -> int:
        return sum(part.tokens for part in self.parts)

    @property
    def pages(self) -> tuple[int, ...]:
        return tuple(dict.fromkeys(part.page for part in self.parts))

    def message(self) -> str:
        """The user message: each part under its marker."""
        return "\n\n".join(f"{part.marker}\n{part.text}" for part in self.parts)

    def describe(self) -> str:
        """``pages 3-7`` or ``page 4``, for errors and logs."""
        pages = self.pages
        if len(pages) == 1:
            return f"page {pages[0]}"
        return f"pages {pages[0]}-{pages[-1]}"


def plan_chunks(pages: Sequence[str], count: Count, budget: int) -> list[Chunk]:
    """Pages packed in order into requests of at most ``budget`` tokens each.

    Blank pages are left out: there is nothing on them to extract."""
    chunks: list[Chunk] = []
    current: list[PagePart] = []
    used = 0
    for number, text in enumerate(pages, 1):
        for part in split_page(number, text, count, budget):
            if current and used + part.tokens > budget:
                chunks.append(Chunk(tuple(current)))
                current, used = [], 0
            current.append(part)
            used += part.tokens
    if current:
        chunks.append(Chunk(tuple(current)))
    return chunks


def split_page(number: int, text: str, count: Count, budget: int) -> list[PagePart]:
    """The page as one part, or cut at line ends into parts that each fit ``budget``."""
    if not text.strip():
        return []
    tokens = count(text) + MARKER_TOKENS
    lines = text.split("\n")
    if tokens <= budget:
        return [PagePart(number, 0, len(lines), text, tokens)]
    room = budget - MARKER_TOKENS
    pieces: list[tuple[int, int, str, int]] = []  # first line, end line, text, tokens
    for index, line in enumerate(lines):
        line_tokens = count(line) + 1
        if line_tokens > room:
            halves = [p for p in _halves(line, count, room) if p]
            pieces.extend((index, index + 1, p, count(p) + 1) for p in halves)
            continue
        if pieces and pieces[-1][1] == index and pieces[-1][3] + line_tokens <= room:
            first, _, joined, used = pieces[-1]
            if _whole_lines(pieces[-1], lines):
                pieces[-1] = (first, index + 1, f"{joined}\n{line}", used + line_tokens)
                continue
        pieces.append((index, index + 1, line, line_tokens))
    total = len(pieces)
    return [
        PagePart(number, first, end, piece, used + MARKER_TOKENS, part=i, parts=total)
        for i, (first, end, piece, used) in enumerate(pieces, 1)
    ]


def _whole_lines(piece: tuple[int, int, str, int], lines: Sequence[str]) -> bool:
    """A piece made of whole lines (not a cut of one long line) may take more lines."""
    first, end, text, _ = piece
    return text == "\n".join(lines[first:end])


def _halves(text: str, count: Count, room: int) -> list[str]:
    """``text`` cut at spaces near the middle until every piece fits ``room`` tokens."""
    if count(text) + 1 <= room or len(text) < 2:
        return [text]
    middle = len(text) // 2
    cut = text.rfind(" ", 0, middle)
    if cut <= 0:
        cut = text.find(" ", middle)
    if cut <= 0:
        cut = middle  # one unbroken word: cut it where it is
    return _halves(text[:cut].rstrip(), count, room) + _halves(text[cut:].lstrip(), count, room)
