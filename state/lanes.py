"""Routes of a saga type with branches (``Pipeline.next_of``; ``lua/includes/lanes.lua``).

A commit whose next step starts with ``&`` or ``|`` names its children, ``+name`` (a
lane) or ``=name`` (a step on the saga's own fields), each optionally followed by
``=p1,p2`` (its other parents). The commit script gets one ready stream per child."""

from __future__ import annotations


def is_route(next_step: str) -> bool:
    """Whether a commit's next step is a route (branches, a join, or a lane's commit)."""
    return next_step[:1] in ("&", "|")


def route_children(next_step: str) -> list[str]:
    """The children a route names, in its order ([] for a plain next step)."""
    if not is_route(next_step):
        return []
    return [item[1:].partition("=")[0] for item in next_step[1:].split()]
