"""What the review's source drawing passes around: the line to find, a box, a drawn page."""

from __future__ import annotations

from typing import NamedTuple

from saga.steps.models import Provenance

Box = tuple[str, tuple[float, ...]]
"""(``line`` or ``value``, (left, bottom, right, top) in PDF points)."""


class Where:
    """The line (and the value's span inside it) to highlight on a page."""

    def __init__(self, p: Provenance | None) -> None:
        self.line = p.line if p else ""
        self.start, self.end = (p.start, p.end) if p else (0, 0)


class Drawn(NamedTuple):
    """A page drawn for the review: the PNG, and whether the line asked for was found
    on it (True when none was asked for); the page says so when it was not."""

    png: bytes
    located: bool
