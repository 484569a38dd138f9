"""A group of biomarkers while it is being built: the piece the grouper and its two
optional passes (``embedding_groups``, ``group_names``) share, so none imports another."""

from __future__ import annotations

from dataclasses import dataclass, field

from saga.steps.models import MemberSource


@dataclass
class Draft:
    """A group being built: its name, whether the table named it, its members."""

    canonical_name: str
    known: bool
    keys: list[str] = field(default_factory=list)
    members: list[str] = field(default_factory=list)
    indexes: list[int] = field(default_factory=list)
    sources: list[MemberSource] = field(default_factory=list)
    """How each member joined, in the order of ``members``."""
