"""Tables for people that fit the terminal.

On a terminal (or with ``COLUMNS`` set) every line fits its width: the columns a
command marks as shrinkable (an error message) are cut first, with an ellipsis,
down to a floor; then its low-value columns are dropped in the order it gives;
a line still too wide is cut at the edge. Piped elsewhere, rows are printed in
full, so ``grep`` and ``less -S`` see everything.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from collections.abc import Mapping, Sequence
from typing import Any

_ANSI = re.compile(r"\033\[[0-9;]*m")
ELLIPSIS = "…"
GAP = 2
"""Spaces between columns."""
MIN_CUT = 4
"""The narrowest a cut column gets when even its floor does not fit."""


def tty() -> bool:
    return sys.stdout.isatty() and os.environ.get("NO_COLOR") is None


def colour(text: str, code: str) -> str:
    return f"\033[{code}m{text}\033[0m" if tty() else text


def terminal_width() -> int | None:
    """The width lines must fit: ``COLUMNS`` when set, else the terminal's on a TTY,
    else None (piped: full rows)."""
    if os.environ.get("COLUMNS", "").strip().isdigit() or sys.stdout.isatty():
        return max(20, shutil.get_terminal_size((80, 24)).columns)
    return None


def visible_len(s: str) -> int:
    return len(_ANSI.sub("", s))


def clip(s: str, n: int | None) -> str:
    """``s`` cut to ``n`` visible characters, the last an ellipsis; colour codes are
    kept (and closed) and count for nothing."""
    if n is None or visible_len(s) <= n:
        return s
    if n <= 0:
        return ""
    out, seen, coloured = [], 0, False
    for part in re.split(f"({_ANSI.pattern})", s):
        if _ANSI.fullmatch(part):
            out.append(part)
            coloured = True
            continue
        room = n - 1 - seen
        out.append(part[:room])
        seen += min(len(part), max(room, 0))
        if seen >= n - 1:
            break
    return "".join(out) + ELLIPSIS + ("\033[0m" if coloured else "")


def fit(
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    width: int,
    *,
    shrink: Mapping[str, int],
    drop: Sequence[str] = (),
) -> tuple[list[str], list[list[str]]]:
    """Headers and cells that fit ``width``: ``shrink`` maps a column to the least
    width it may be cut to (first named, last cut back); ``drop`` lists the columns
    to leave out, first the first, when cutting is not enough."""
    keep = list(headers)
    natural = {h: max([len(h), *(visible_len(r[i]) for r in rows)]) for i, h in enumerate(headers)}

    def floor(h: str) -> int:
        return min(natural[h], shrink.get(h, natural[h]))

    def least(cols: list[str]) -> int:
        return sum(floor(h) for h in cols) + GAP * (len(cols) - 1)

    for name in drop:
        if least(keep) <= width:
            break
        if name in keep and len(keep) > 1:
            keep.remove(name)
    sizes = {h: floor(h) for h in keep}
    spare = width - least(keep)
    for h in [h for h in shrink if h in keep]:  # still too wide: below the floors
        cut = min(max(-spare, 0), max(sizes[h] - MIN_CUT, 0))
        sizes[h] -= cut
        spare += cut
    for h in reversed([h for h in shrink if h in keep]):  # the first named is cut hardest
        grow = min(max(spare, 0), natural[h] - sizes[h])
        sizes[h] += grow
        spare -= grow
    index = [headers.index(h) for h in keep]
    cells = [[clip(r[i], sizes[headers[i]]) for i in index] for r in rows]
    return [clip(h, sizes[h]) for h in keep], cells


def table(
    headers: Sequence[str],
    rows: Sequence[Sequence[Any]],
    *,
    shrink: Mapping[str, int] | None = None,
    drop: Sequence[str] = (),
    width: int | bool | None = True,
) -> str:
    """An aligned table; box lines only on a TTY. ``width=True`` fits the terminal
    (``terminal_width``), an int fits that, None prints full rows. Without ``shrink``
    the widest column is the one cut."""
    cells = [[str(c) for c in row] for row in rows]
    heads = list(headers)
    limit = terminal_width() if width is True else (width or None)
    if limit is not None and cells:
        if shrink is None:
            widest = max(range(len(heads)), key=lambda i: max(visible_len(r[i]) for r in cells))
            shrink = {heads[widest]: 8}
        heads, cells = fit(heads, cells, limit, shrink=shrink, drop=drop)
    widths = [len(h) for h in heads]
    for row in cells:
        for i, c in enumerate(row):
            widths[i] = max(widths[i], visible_len(c))

    def line(values: Sequence[str]) -> str:
        parts = [v + " " * (widths[i] - visible_len(v)) for i, v in enumerate(values)]
        return clip(("  ".join(parts)).rstrip(), limit)

    sep = "─" if tty() else "-"
    out = [colour(line(heads), "1"), clip("  ".join(sep * w for w in widths), limit)]
    out += [line(r) for r in cells]
    return "\n".join(out)


def wrap(label: str, text: str, width: int | None, indent: int = 9) -> list[str]:
    """``label`` then ``text`` wrapped at ``width`` under it, never cut (a header line)."""
    import textwrap

    first = f"{label:<{indent}}"
    if width is None or len(first) + len(text) <= width:
        return [first + text]
    lines = textwrap.wrap(
        text, width=width, initial_indent=first, subsequent_indent=" " * indent,
        break_long_words=True, break_on_hyphens=False,
    )  # fmt: skip
    return lines or [first]
