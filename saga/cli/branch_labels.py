"""How ``saga show`` and the console name a step of a type with branches: each row
names the steps it runs after, and a step that runs in parallel with another (a lane)
is marked, so the branches read as parallel rows."""

from __future__ import annotations

from collections.abc import Iterable, Mapping


def step_labels(
    parents: Iterable[tuple[str, tuple[str, ...]]], lanes: Iterable[str], *, fancy: bool
) -> Mapping[str, str]:
    """Step -> its row label (``∥ fraud ← intake``; ASCII ``|| fraud <- intake`` when not
    ``fancy``); {} for a chain (its rows are labelled by the step alone)."""
    graph, parallel = dict(parents), set(lanes)
    if not graph:
        return {}
    mark, arrow = ("∥ ", " ← ") if fancy else ("|| ", " <- ")
    out = {}
    for step, before in graph.items():
        label = (mark if step in parallel else "") + step
        out[step] = label + (arrow + ", ".join(before) if before else "")
    return out
