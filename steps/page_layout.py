"""The lines of a document as the extractors should see them.

``document_lines`` walks the pages and keeps, for each line, the text as the page
holds it (``raw``: what provenance quotes) and a working copy of the same length
(``work``) in which

* dot leaders (``Sodium ......... 140``) are blanked,
* a column separator other than the pipe (``;`` of a printed export, a box-drawing
  bar ``│``) is written as a pipe on the lines of a page that use it as one: two or
  more lines each splitting into the same number (3+) of cells by it, so that the
  cells are read as a pipe table's (``Kalium;3,3;mmol/l;3,5-5,1;L``), and
* numerals are written the decimal-point way when the document writes decimals
  with commas (``saga.steps.numbers``: ``13,2`` then means 13.2, ``7,500`` 7.5 and
  ``245.000`` 245000).

Because the working copy keeps every character at its place, a span found in it
is the same span in ``raw``. Repeating page furniture is dropped: lines such as
``Page 2 of 3`` or ``Printed 05.03.2024 ... Page 2 of 3`` anywhere, and lines that
recur word for word at the top or bottom of several pages (letterheads,
disclaimers) unless the caller keeps them (a table header repeated on each page
still opens its table).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from saga.steps.numbers import COMMA, POINT, NumberFormat, decide, to_working

EDGE_LINES = 4
"""How many lines at the top and at the bottom of a page count as its header/footer."""

_PAGE_OF = re.compile(
    r"(?i)\b(?:page|seite|pg\.?)\s*\d+\s*(?:of|von|/)\s*\d+\b|^printed\b|^gedruckt\b"
)
_DOT_LEADER = re.compile(r"(?:\s?\.){3,}|\u2026+|(?<=\S)(?:\s?_){3,}")
SEPARATORS = ";\u2502\u2503\u00a6"
"""Characters a table may separate its columns with, besides the pipe: ``;`` ``│`` ``┃`` ``¦``."""
MIN_SEPARATED_LINES = 2
MIN_CELLS = 3
_PROSE_SEMICOLON = re.compile(r"\S;\s")


@dataclass(frozen=True, slots=True)
class SourceLine:
    """One line of one page: ``raw`` as extracted (trimmed), ``work`` the same length."""

    page: int
    raw: str
    work: str


def is_page_furniture(line: str) -> bool:
    """``Page 2 of 3``, ``Seite 1 von 2``, ``Printed ...``: never a result."""
    return bool(_PAGE_OF.search(line))


def uses_decimal_comma(pages: Sequence[str]) -> bool:
    """True when the document writes decimals with commas (``numbers.decide``)."""
    return decide(pages).decimal == COMMA


def working_copy(line: str, *, decimal_comma: bool | NumberFormat, separators: str = "") -> str:
    """``line`` with dot leaders blanked, ``separators`` made pipes and numerals written
    the decimal-point way."""
    work = _DOT_LEADER.sub(lambda m: " " * len(m.group(0)), line)
    for separator in separators:
        if _splits(line, separator):
            work = work.replace(separator, "|")
    if isinstance(decimal_comma, NumberFormat):
        return to_working(work, decimal_comma)
    return to_working(work, NumberFormat(COMMA if decimal_comma else POINT))


def document_lines(
    pages: Sequence[str], keep: Callable[[str], bool] = lambda line: False
) -> list[list[SourceLine]]:
    """Per page, its non-empty lines minus page furniture, with working copies.

    ``keep`` spares a repeated edge line (a table header on every page).
    """
    fmt = decide(pages)
    split = [[line.strip() for line in page.split("\n") if line.strip()] for page in pages]
    repeated = repeating_edges(split)
    return [
        [
            SourceLine(number, line, working_copy(line, decimal_comma=fmt, separators=seps))
            for index, line in enumerate(lines)
            if not is_page_furniture(line)
            and not (_at_edge(index, len(lines)) and _key(line) in repeated and not keep(line))
        ]
        for number, lines in enumerate(split, start=1)
        for seps in [column_separators(lines)]
    ]


def column_separators(lines: Sequence[str]) -> str:
    """The separators (``SEPARATORS``) a page uses as a table's column boundaries.

    One is when ``MIN_SEPARATED_LINES`` lines split by it into the same number of
    cells, at least ``MIN_CELLS``: a table's rows agree on their cell count. A
    semicolon written as prose writes it (glued to the word before, a space after:
    ``Na 134; K 3.4``) separates no columns on its line: a column boundary is written
    the same on both sides (``3,3;mmol/l``, ``98 ; mg/dL``). A line that has pipes
    keeps its other characters: the pipes are its columns.
    """
    found = ""
    for separator in SEPARATORS:
        counts = Counter(line.count(separator) for line in lines if _splits(line, separator))
        if any(n >= MIN_SEPARATED_LINES for n in counts.values()):
            found += separator
    return found


def _splits(line: str, separator: str) -> bool:
    """``separator`` may be a column boundary on ``line`` (see ``column_separators``)."""
    if line.count(separator) < MIN_CELLS - 1 or "|" in line:
        return False
    return separator != ";" or _PROSE_SEMICOLON.search(line) is None


def repeating_edges(pages: list[list[str]]) -> frozenset[str]:
    """Keys of edge lines that occur, word for word, on at least two pages.

    Word for word: a result row that starts two pages of a cumulative report has
    other values on each, and stays.
    """
    if len(pages) < 2:
        return frozenset()
    seen: Counter[str] = Counter()
    for lines in pages:
        keys = {_key(line) for i, line in enumerate(lines) if _at_edge(i, len(lines))}
        seen.update(keys)
    return frozenset(key for key, count in seen.items() if count >= 2 and _worth_a_key(key))


def _at_edge(index: int, count: int) -> bool:
    return index < EDGE_LINES or index >= count - EDGE_LINES


def _key(line: str) -> str:
    return " ".join(line.lower().split())


def _worth_a_key(key: str) -> bool:
    # a repeated one-word line ("Hematology") may be a section title: keep it
    return len(key.split()) >= 3
