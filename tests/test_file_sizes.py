"""Small files, one responsibility each: no module or Lua script of the runtime
(saga/, state/, steps/) grows past 400 lines; split it where its parts say so
(ARCHITECTURE.md names where each kind of code lives)."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MOST = 400


def test_no_runtime_file_is_over_400_lines() -> None:
    roots = [REPO / "saga", REPO / "state", REPO / "steps"]
    sources = [p for r in roots for p in r.rglob("*") if p.suffix in (".py", ".lua")]
    assert len(sources) > 300, len(sources)  # the walk found the tree
    long = {
        str(p.relative_to(REPO)): n
        for p in sources
        if "__pycache__" not in p.parts
        and not p.is_symlink()
        and (n := len(p.read_text(encoding="utf-8").splitlines())) > MOST
    }
    assert not long, f"over {MOST} lines: {long}"
