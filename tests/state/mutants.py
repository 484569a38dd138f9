"""Mutants of the Lua scripts, for the model tests: one (path, old, new) replacement
applied where the scripts are read, so every script that includes the file gets it."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import pytest

from saga.state import scripts

Mutant = tuple[str, str, str]
"""(script path, text in it, what replaces the text)."""


def mutated(
    monkeypatch: pytest.MonkeyPatch, mutants: Mapping[str, Mutant], name: str
) -> Iterator[str]:
    """The body of a ``mutant`` fixture: scripts with ``mutants[name]`` applied (none for
    ""), loaded at once so a mutant whose line is gone fails here, not inside the test."""
    if name:
        path, old, new = mutants[name]
        real = scripts._read

        def read(p: str) -> str:
            text = real(p)
            if p == path:
                assert old in text, f"{path} no longer holds {old!r}: update the mutant"
                text = text.replace(old, new)
            return text

        monkeypatch.setattr(scripts, "_read", read)
    scripts.load_all.cache_clear()
    scripts.load_all()
    yield name
    scripts.load_all.cache_clear()
