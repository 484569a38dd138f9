"""Reading a page laid out in two column blocks one block at a time.

pypdf's layout mode places every character at its x position on a character grid
and joins text whose baselines are close onto one line. When two columns keep
their own row pitch (two tables side by side, prose beside a table), a grid line
then holds the left column's row and an unrelated right column's row, and other
lines hold only one of them. Read line by line, a label from one column can meet a
number from the other.

A block is split at a gutter: a run of character positions blank on every line of
a run of lines, with the right column's text starting at the same position on
several lines. A table's own column gaps look like that too, so a split needs
evidence that the two sides are independent: lines holding text on only one side
(on both sides, several of them). Rows aligned across the gutter (every line holds
a left and a right row) show no such evidence and stay as they are: each line then
still reads as two whole rows.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from saga.steps.synonyms import canonical_name

GUTTER = 3
"""Blank character positions left of the right column's edge on every line of a block."""
MIN_LINES = 4
"""Non-empty lines a block needs before it can be split."""
MIN_ONE_SIDED = 2
"""Lines holding text only on the left, and lines only on the right, a split needs."""
ONE_SIDED_SHARE = 0.25
"""Share of a block's non-empty lines that hold text on one side only."""
MIN_EDGE_HITS = 3
"""Lines whose right-side text starts exactly at the gutter's edge."""
MIN_NAMED = 2
"""Lines whose right-side text starts with a known analyte name (the other evidence)."""
MAX_WIDTH = 400
"""Longer grid lines are not examined (a bound on the work per page)."""


MAX_SPLITS = 6
"""Splits per page (blocks below each other, columns inside a column): a bound on the work."""

_FIRST_CELL = re.compile(r" {2,}")
_WORD_AFTER_GUTTER = re.compile(rf" {{{GUTTER},}}(?=\S)")


@dataclass(frozen=True, slots=True)
class _Block:
    start: int
    end: int  # exclusive
    edge: int
    score: int


def split_columns(text: str) -> str:
    """``text`` (a layout-mode page) with each two-column block read left block first."""
    budget = [MAX_SPLITS]
    return "\n".join(_split(text.split("\n"), budget))


def _split(lines: list[str], budget: list[int]) -> list[str]:
    if budget[0] <= 0:
        return lines
    block = _best_block(lines)
    if block is None:
        return lines
    budget[0] -= 1
    head, body, tail = lines[: block.start], lines[block.start : block.end], lines[block.end :]
    # a line blank on one side only is the other column's row, not a paragraph break
    left = [line[: block.edge].rstrip() for line in body if _side(line, 0, block.edge)]
    right = [line[block.edge :].rstrip() for line in body if _side(line, block.edge, None)]
    return [
        *head,
        *_split(left, budget),
        "",
        *_split(right, budget),
        *_split(tail, budget),
    ]


def _side(line: str, start: int, end: int | None) -> bool:
    return not line.strip() or bool(line[start:end].strip())


def _best_block(lines: list[str]) -> _Block | None:
    best: _Block | None = None
    for edge in sorted(_edges(lines)):
        for block in _blocks(lines, edge):
            if best is None or block.score > best.score:
                best = block
    return best


def _edges(lines: list[str]) -> set[int]:
    """Positions where a word starts after a gutter's worth of spaces."""
    return {
        match.end()
        for line in lines
        if len(line) <= MAX_WIDTH
        for match in _WORD_AFTER_GUTTER.finditer(line)
    }


def _fits(line: str, edge: int) -> bool:
    """No word crosses the gutter left of ``edge``."""
    return len(line) <= edge - GUTTER or line[edge - GUTTER : edge].isspace()


def _blocks(lines: list[str], edge: int) -> list[_Block]:
    found: list[_Block] = []
    start = 0
    while start < len(lines):
        end = start
        while end < len(lines) and (not lines[end].strip() or _fits(lines[end], edge)):
            end += 1
        block = _judge(lines, start, end, edge)
        if block:
            found.append(block)
        start = end + 1
    return found


def _judge(lines: list[str], start: int, end: int, edge: int) -> _Block | None:
    # trim blank lines so a block starts and ends with text
    while start < end and not lines[start].strip():
        start += 1
    while end > start and not lines[end - 1].strip():
        end -= 1
    body = [line for line in lines[start:end] if line.strip()]
    if len(body) < MIN_LINES:
        return None
    left_only = sum(1 for line in body if not line[edge:].strip())
    right_only = sum(1 for line in body if not line[:edge].strip())
    starts = [line[edge:] for line in body if len(line) > edge and line[edge] != " "]
    if len(starts) < MIN_EDGE_HITS:
        return None
    one_sided = min(left_only, right_only) >= MIN_ONE_SIDED and (
        left_only + right_only >= ONE_SIDED_SHARE * len(body)
    )
    if not (one_sided or _labelled(starts)):
        return None
    return _Block(start, end, edge, len(body))


def _labelled(starts: list[str]) -> bool:
    """The right side starts lines with analyte names of its own: a column, not a cell.

    A table's own gaps have a value, unit, range, flag or code right of them, never a
    name; a second column of results (rows or name-above-value cards) has its names.
    """
    named = sum(1 for text in starts if canonical_name(_FIRST_CELL.split(text, 1)[0]) is not None)
    return named >= MIN_NAMED
