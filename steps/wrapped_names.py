"""Analyte names wrapped over several lines of a table cell.

A PDF table cell that wraps ``Anti-cyclic citrullinated peptide (high
sensitivity)`` prints the name on two or three lines; the result sits on the
first, the middle or the last of them. A row whose name starts in lower case or
closes a bracket it never opened takes the name fragments printed above it; a
row whose name opens a bracket (or ends with a hyphen) takes the fragment below.
Only short lines without digits count as fragments, so prose stays prose.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Protocol

MAX_FRAGMENTS = 3
_FRAGMENT = re.compile(r"[A-Za-z\u00c0-\u024f(][A-Za-z\u00c0-\u024f\s(),/+-]*")


class _Line(Protocol):
    @property
    def work(self) -> str: ...


def is_fragment(text: str) -> bool:
    """A short run of words with no digits and no sentence end: part of a name."""
    return bool(_FRAGMENT.fullmatch(text)) and len(text.split()) <= 6


def needs_prefix(name: str) -> bool:
    """``sensitivity)`` or ``peptide (high``: the name began on an earlier line."""
    first = name.split(maxsplit=1)[0] if name.split() else ""
    lower_word = len(first) >= 3 and first.isalpha() and first.islower()  # not "eGFR", "pH"
    return lower_word or name.count(")") > name.count("(")


def needs_suffix(name: str) -> bool:
    """``Anti-CCP (high``: the name goes on on the next line."""
    return name.count("(") > name.count(")") or name.endswith(("-", ","))


class Fragments:
    """Name fragments seen since the last result, and lines taken from below."""

    def __init__(self) -> None:
        self._pending: list[str] = []
        self._taken: set[int] = set()

    def offer(self, text: str) -> None:
        """A line that gave nothing: kept when it may be part of a name."""
        if is_fragment(text):
            self._pending = [*self._pending, text][-MAX_FRAGMENTS:]
        else:
            self._pending = []

    def clear(self) -> None:
        self._pending = []

    def consumed(self, index: int) -> bool:
        """True when the line at ``index`` was already read as the end of a name."""
        return index in self._taken

    def complete(self, name: str, lines: Sequence[_Line], index: int) -> str:
        """``name`` with the fragments above and below that belong to it."""
        parts, pending = [name], list(self._pending)
        while pending and needs_prefix(" ".join(parts)):
            parts.insert(0, pending.pop())
        joined = " ".join(parts)
        below = index + 1
        if index >= 0 and below < len(lines) and needs_suffix(joined):
            text = lines[below].work.strip()
            if is_fragment(text):
                self._taken.add(below)
                joined = f"{joined} {text}"
        return joined
