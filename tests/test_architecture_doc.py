"""ARCHITECTURE.md stays true: every path and module it names exists, and its move
table is on one side of the move (each row's old path or its new one, never both)."""

from __future__ import annotations

import re
from pathlib import Path

from tests import import_graph

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "ARCHITECTURE.md"
MODULES = import_graph.modules(REPO)
TOKEN = re.compile(r"`([^`\s]+)`")
PAIR = re.compile(r"`([^`\s]+)` → `([^`\s]+)`")
ROOTS = ("saga", "state", "steps", "adapters", "deploy", "tests", "docs", ".ci")


def _sections(text: str) -> tuple[str, str]:
    """The page without its move table, and the move table."""
    before, _, rest = text.partition("<!-- move:begin -->")
    move, _, after = rest.partition("<!-- move:end -->")
    return before + after, move


def _is_path(token: str) -> bool:
    if any(c in token for c in "<*{"):
        return False  # a pattern: cmd_<name>.py, *_pages.py
    top = token.split("/", maxsplit=1)[0]
    return ("/" in token and top in ROOTS) or token.endswith((".md", ".toml"))


def _is_module(token: str) -> bool:
    return re.fullmatch(r"saga(\.\w+)+", token) is not None


def _module_exists(token: str) -> bool:
    """A module, or one attribute of a module (``saga.App``, ``saga.state.errors``)."""
    found = import_graph._known(token, MODULES)
    return found == token or found == token.rpartition(".")[0]


def _missing(text: str) -> list[str]:
    out = []
    for token in TOKEN.findall(text):
        gone = _is_path(token) and not (REPO / token).exists()
        if gone or (_is_module(token) and not _module_exists(token)):
            out.append(token)
    return out


def test_every_path_and_module_it_names_exists() -> None:
    """Each path (saga/worker/executor.py, state/lua/...) and module (saga.state.keys)
    the page names is in the tree; the page names many."""
    page, _ = _sections(DOC.read_text())
    assert len([t for t in TOKEN.findall(page) if _is_path(t)]) > 40
    assert _missing(page) == []


def test_the_move_table_is_on_one_side_of_the_move() -> None:
    """Before the move every old path exists and no new one does; after it, the reverse
    (no module is left behind at an old path), and then every other name in the section
    (the history's old paths aside) exists."""
    _, move = _sections(DOC.read_text())
    pairs = PAIR.findall(move)
    assert len(pairs) > 15
    sides = {((REPO / old).exists(), (REPO / new).exists()) for old, new in pairs}
    assert sides in ({(True, False)}, {(False, True)}), sides
    if sides == {(False, True)}:
        olds = {old for old, _ in pairs}
        assert [t for t in _missing(move) if t not in olds] == []


def test_a_missing_path_is_reported() -> None:
    """The check is not vacuous: a named path or module that is not there is reported."""
    text = "`saga/worker/nowhere.py`, `saga.no_such_module.x`, `saga/worker/executor.py`"
    assert _missing(text) == ["saga/worker/nowhere.py", "saga.no_such_module.x"]
