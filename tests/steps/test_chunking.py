"""Chunking: pages packed into requests under a token budget, long pages cut at lines."""

from __future__ import annotations

import itertools

import pytest

from saga.steps.chunking import (
    MARKER_TOKENS,
    Budget,
    NoRoomError,
    page_budget,
    plan_chunks,
    split_page,
)


def words(text: str) -> int:
    """A token per word: easy to reason about in a table."""
    return len(text.split())


@pytest.mark.parametrize(
    ("window", "output", "prompt", "budget"),
    [
        (128_000, 16_384, 1_000, Budget(pages=5_461, answer=16_384)),  # answer room bounds it
        (8_192, 8_192, 1_000, Budget(pages=1_365, answer=4_096)),  # half the window answers
        (4_000, 16_384, 900, Budget(pages=666, answer=2_000)),
        (3_000, 4_096, 1_000, Budget(pages=200, answer=1_500)),  # the prompt leaves 200
    ],
)
def test_budget_leaves_room_for_the_prompt_and_the_answer(
    window: int, output: int, prompt: int, budget: Budget
) -> None:
    """Page tokens = the window less prompt and answer room, at most a third of the answer."""
    assert page_budget(window, output, prompt) == budget


def test_a_window_too_small_for_the_prompt_is_refused() -> None:
    """No room left after prompt and answer: NoRoomError with the figures."""
    with pytest.raises(NoRoomError, match="window of 2000 tokens leaves no room"):
        page_budget(2_000, 4_096, 1_500)


def test_pages_are_packed_in_order_as_few_requests_as_fit() -> None:
    """Whole pages, in order, greedily; blank pages are not sent; every page once."""
    pages = ["one two three"] * 7 + ["   "] + ["four five"]
    per_page = 3 + MARKER_TOKENS
    chunks = plan_chunks(pages, words, budget=3 * per_page)
    assert [c.pages for c in chunks] == [(1, 2, 3), (4, 5, 6), (7, 9)]
    assert all(c.tokens <= 3 * per_page for c in chunks)
    assert "=== page 9 ===\nfour five" in chunks[-1].message()
    assert chunks[0].describe() == "pages 1-3" and chunks[-1].describe() == "pages 7-9"


def test_a_page_over_the_budget_is_cut_at_line_ends() -> None:
    """A long page becomes parts of whole lines, each within the budget, marked part i of n."""
    lines = [f"Analyte {i}  {i}.5  mg/dL  1 - 9" for i in range(40)]  # 6 words a line
    page = "\n".join(lines)
    budget = MARKER_TOKENS + 70
    parts = split_page(3, page, words, budget)
    assert len(parts) > 1 and all(p.tokens <= budget for p in parts)
    assert "\n".join(p.text for p in parts) == page
    assert parts[0].first == 0 and parts[-1].end == len(lines)
    assert all(a.end == b.first for a, b in itertools.pairwise(parts))
    assert parts[1].marker == f"=== page 3 (part 2 of {len(parts)}) ==="


def test_a_line_over_the_budget_is_cut_at_spaces() -> None:
    """One enormous line is cut into pieces that fit; no word is lost."""
    line = " ".join(f"w{i}" for i in range(500))
    parts = split_page(1, f"header\n{line}", words, budget=MARKER_TOKENS + 60)
    assert all(p.tokens <= MARKER_TOKENS + 60 for p in parts)
    assert " ".join(p.text for p in parts).split() == f"header {line}".split()
    assert all((p.first, p.end) == (1, 2) for p in parts[1:])


def test_two_hundred_pages_under_a_small_budget() -> None:
    """200 pages of ~40 tokens under a 500-token budget: 12 pages a request, 17 requests."""
    pages = [" ".join(["word"] * (40 - MARKER_TOKENS)) for _ in range(200)]
    chunks = plan_chunks(pages, words, budget=500)
    assert len(chunks) == 17
    assert [p for c in chunks for p in c.pages] == list(range(1, 201))
