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

from saga.steps.synonyms import canonical_name

MAX_FRAGMENTS = 3
_FRAGMENT = re.compile(r"[A-Za-z\u00c0-\u024f(][\w\s(),/+.'-]*")
_BRACKETED = re.compile(r"\([^()]*\)")


class _Line(Protocol):
    @property
    def work(self) -> str: ...


def is_fragment(text: str) -> bool:
    """A short run of words, no digits outside brackets, no sentence end: part of a name."""
    unbracketed = _BRACKETED.sub("", text)  # "Rate (CKD-EPI 2021)": digits in brackets are fine
    return (
        bool(_FRAGMENT.fullmatch(text))
        and len(text.split()) <= 6
        and not any(ch.isdigit() for ch in unbracketed)
        and not text.endswith(".")
    )


def needs_prefix(name: str) -> bool:
    """``sensitivity)`` or ``peptide (high``: the name began on an earlier line."""
    first = name.split(maxsplit=1)[0] if name.split() else ""
    lower_word = len(first) >= 3 and first.isalpha() and first.islower()  # not "eGFR", "pH"
    return lower_word or name.count(")") > name.count("(")


def needs_suffix(name: str) -> bool:
    """``Anti-CCP (high``: the name goes on on the next line."""
    return name.count("(") > name.count(")") or name.endswith(("-", ","))


def _continues(name: str, text: str, after: str) -> bool:
    """``text`` (the line below a row) ends that row's name rather than starting the next.

    A bracketed qualifier or a lower-case word goes on with the name above unless the
    line after needs it as its own start; so does a word that makes a known name of
    an unknown one (``Gamma-Glutamyl`` / ``Transferase``).
    """
    first_cell = after.split("  ", maxsplit=1)[0] if after else ""
    if first_cell and needs_prefix(first_cell):
        return False
    if text.startswith("(") or needs_prefix(text):
        return True
    return canonical_name(name) is None and canonical_name(f"{name} {text}") is not None


class Fragments:
    """Name fragments seen since the last result, and lines taken from below."""

    def __init__(self) -> None:
        self._pending: list[str] = []

    def offer(self, text: str) -> None:
        """A line that gave nothing: kept when it may be part of a name."""
        if is_fragment(text):
            self._pending = [*self._pending, text][-MAX_FRAGMENTS:]
        else:
            self._pending = []

    def clear(self) -> None:
        self._pending = []

    def complete(self, name: str, lines: Sequence[_Line], index: int) -> tuple[str, list[int]]:
        """``name`` with the fragments above and below that belong to it, and the lines taken."""
        parts, pending = [name], list(self._pending)
        while pending and needs_prefix(" ".join(parts)):
            parts.insert(0, pending.pop())
        joined = " ".join(parts)
        below = index + 1
        if below >= len(lines):
            return joined, []
        text = lines[below].work.strip()
        after = lines[below + 1].work.strip() if below + 1 < len(lines) else ""
        if is_fragment(text) and (needs_suffix(joined) or _continues(joined, text, after)):
            return f"{joined} {text}", [below]
        return joined, []
