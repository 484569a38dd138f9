"""The Lua scripts as the static checks read them: raw files and rendered bodies."""

from __future__ import annotations

from pathlib import Path

import saga.state
from saga.state.scripts import _preamble, render
from tests.state.lua_scan import strip_comments

LUA = Path(saga.state.__file__).resolve().parent / "lua"
RAW = {p.relative_to(LUA).as_posix(): p.read_text() for p in sorted(LUA.rglob("*.lua"))}


def body(name: str) -> str:
    """A rendered script without its generated preamble, comments stripped."""
    full = render(name)
    assert full.startswith(_preamble())
    return strip_comments(full[len(_preamble()) :])


def header(name: str) -> str:
    lines = []
    for line in RAW[f"{name}.lua"].splitlines():
        if not line.startswith("--"):
            break
        lines.append(line)
    return "\n".join(lines)
