"""Prose lines gathered into a paragraph, so a sentence can wrap between name and value.

``C-reactive protein was 48`` / ``mg/L (ref <5)`` or ``... WBC`` / ``17.8, Hgb 11.9``:
the narrative reader runs on the lines joined by spaces, and each value found is
mapped back to the one line that holds it (a value never wraps), with its span.
"""

from __future__ import annotations

from saga.steps.lab_rows import Row
from saga.steps.narrative import narrative_rows
from saga.steps.page_layout import SourceLine

MAX_LINES = 12
"""A paragraph longer than this is read in parts (keeps the joined text short)."""


class Paragraph:
    """Consecutive prose lines of one page, read together."""

    def __init__(self) -> None:
        self.lines: list[SourceLine] = []

    def add(self, line: SourceLine) -> list[tuple[Row, SourceLine]]:
        """Keep ``line``; returns what a full paragraph held (read early when it is long)."""
        self.lines.append(line)
        return self.flush() if len(self.lines) >= MAX_LINES else []

    def flush(self) -> list[tuple[Row, SourceLine]]:
        """The results the paragraph states, each with the line that holds its value."""
        lines, self.lines = self.lines, []
        if not lines:
            return []
        starts, parts, offset = [], [], 0
        for line in lines:
            starts.append(offset)
            parts.append(line.work)
            offset += len(line.work) + 1
        found = []
        for row in narrative_rows(" ".join(parts)):
            index = max(i for i, start in enumerate(starts) if start <= row.start)
            shift = starts[index]
            if row.end - shift <= len(lines[index].work):
                found.append((Row(row.biomarker, row.start - shift, row.end - shift), lines[index]))
        return found
