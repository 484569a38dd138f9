"""Static checks of the Lua scripts against the Python model: names, codes, states, key
strings (keys and loops: ``test_lua_keys_and_loops``).

No Redis needed: the scripts are read from the package (raw files) and rendered by the
loader (preamble + includes), then scanned by ``tests.state.lua_scan``.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from saga.state import codes
from saga.state.codes import RC
from saga.state.keys import INDEXED, SHARED_INDEX
from saga.state.model import EventType, SagaState
from saga.state.scripts import SCRIPT_NAMES, _preamble
from tests.state.lua_scan import (
    blank_strings,
    literals,
    strip_comments,
)
from tests.state.lua_source import RAW, body, header

REPO = Path(__file__).resolve().parents[2]
REFUSALS = [c for c in RC if c not in (RC.OK, RC.DUPLICATE)]


def header_returns(name: str) -> set[str]:
    text = header(name)
    start = text.index("-- Returns:")
    end = text.find("-- Emits:", start)
    return set(re.findall(r"\bRC\.(\w+)", text[start : end if end != -1 else None]))


# -- the script set -------------------------------------------------------------
def test_every_script_file_is_registered_and_every_include_used() -> None:
    """Each lua file is a registered script or an include that some script uses."""
    scripts = {n for n in RAW if "/" not in n}
    assert scripts == {f"{n}.lua" for n in SCRIPT_NAMES}
    used = {m for n in SCRIPT_NAMES for m in re.findall(r"--@include (\w+)", RAW[f"{n}.lua"])}
    assert {f"includes/{u}.lua" for u in used} == {n for n in RAW if "/" in n}


@pytest.mark.parametrize("name", SCRIPT_NAMES)
def test_header_lists_keys_argv_returns_and_emits(name: str) -> None:
    """Every script header documents KEYS, ARGV, Returns and Emits, and names KEYS[1] first."""
    text = header(name)
    for part in ("KEYS[1]", "ARGV[1]", "Returns:", "Emits:"):
        assert part in text, f"{name}: header lacks {part}"


# -- codes and states -----------------------------------------------------------
@pytest.mark.parametrize("source", [*RAW, *(f"rendered:{n}" for n in SCRIPT_NAMES)])
def test_rc_and_state_names_exist_in_the_enums(source: str) -> None:
    """Every RC.NAME and STATE.NAME a script uses exists in the Python enums."""
    code = body(source.split(":")[1]) if source.startswith("rendered:") else RAW[source]
    code = blank_strings(strip_comments(code))
    assert set(re.findall(r"\bRC\.(\w+)", code)) <= set(RC.__members__)
    assert set(re.findall(r"\bSTATE\.(\w+)", code)) <= set(SagaState.__members__)


@pytest.mark.parametrize("name", SCRIPT_NAMES)
def test_header_return_codes_exist_and_refusals_are_mapped(name: str) -> None:
    """Codes in a header's Returns exist in RC; refusals have an exception and a message."""
    listed = header_returns(name)
    assert listed, f"{name}: no RC codes under Returns:"
    assert listed <= set(RC.__members__), listed - set(RC.__members__)
    for code_name in listed:
        code = RC[code_name]
        if code in REFUSALS:
            assert code in codes._ERRORS, f"{code_name} has no exception in codes._ERRORS"
            assert code in codes._MESSAGES, f"{code_name} has no message in codes._MESSAGES"


@pytest.mark.parametrize("name", SCRIPT_NAMES)
def test_every_code_a_script_returns_is_listed_in_its_header(name: str) -> None:
    """The header's Returns section lists every code the script (with includes) can return."""
    used = set(re.findall(r"\bRC\.(\w+)", blank_strings(body(name))))
    assert used <= header_returns(name), f"{name}: unlisted {used - header_returns(name)}"


def test_every_refusal_code_has_an_exception_and_a_message() -> None:
    """codes._ERRORS and codes._MESSAGES cover every refusal code, and raise_for uses them."""
    assert set(codes._ERRORS) == set(REFUSALS) == set(codes._MESSAGES)
    for code in REFUSALS:
        with pytest.raises(codes._ERRORS[code]):
            codes.raise_for(code, "r1")


def test_preamble_tables_match_the_enums() -> None:
    """The generated preamble carries every RC value, state value and 0-based state position."""
    pre = _preamble()
    for code in RC:
        assert f"{code.name}={code.value}" in pre
    for state in SagaState:
        assert f"{state.name}='{state.value}'" in pre
        # The compensation states share an index key with one of INDEXED's.
        assert f"{state.value}={INDEXED.index(SHARED_INDEX.get(state, state))}" in pre


@pytest.mark.parametrize("source", list(RAW))
def test_no_state_string_literal_outside_the_preamble(source: str) -> None:
    """States appear only as STATE.X: no string literal equals a SagaState value."""
    # The one exception is an event name right after 'e', (EventType.CANCELLED is
    # spelled like the state); those must be EventType values.
    code = strip_comments(RAW[source])
    states = {s.value for s in SagaState}
    bad = []
    for lit in literals(code):
        if lit.value not in states:
            continue
        before = code[: lit.start].rstrip()
        if re.search(r"""['"]e['"]\s*,$""", before) and lit.value in set(EventType):
            continue
        line = code.count("\n", 0, lit.start) + 1
        bad.append(f"{source}:{line}: '{lit.value}'")
    assert bad == [], "state literals (use STATE.X): " + ", ".join(bad)


def test_event_literals_are_event_types_and_every_event_is_emitted() -> None:
    """Every history event name a script writes is an EventType, and every EventType is written."""
    code = "\n".join(strip_comments(t) for t in RAW.values())
    written = set(re.findall(r"""['"]e['"]\s*,\s*['"](\w+)['"]""", code))
    written |= set(re.findall(r"""\bev\[2\]\s*=\s*['"](\w+)['"]""", code))
    written |= set(re.findall(r"""ev\[#ev \+ 1\] = ['"]e['"]\s+ev\[#ev \+ 1\] = ['"](\w+)""", code))
    # fail_step chooses between parked and retry_scheduled after appending 'e'
    written |= {lit.value for lit in literals(code) if lit.value in {"parked", "retry_scheduled"}}
    assert written <= {e.value for e in EventType}, written - {e.value for e in EventType}
    assert written == {e.value for e in EventType}, {e.value for e in EventType} - written


# -- key strings in Python ------------------------------------------------------
_KEY_PARTS = re.compile(r"\{p(\d+\}|$)|:(saga|ready|hist|delayed|dead|idx|pages|quarantine):")


KEY_MODULES = {"state/keys.py", "state/shared_keys.py"}
"""The key schema: the partitioned keys and the keys every type and partition shares."""
REFERENCE_DESIGNS = {"saga/bench/minimal.py", "saga/bench/seed_protocol.py"}
"""Benchmark baselines of other designs: they own a separate keyspace, never saga's keys."""


def _python_files() -> list[Path]:
    skip = {".venv", "build", "dist", "tests", ".git", "node_modules"}
    out = []
    for path in REPO.rglob("*.py"):
        rel = path.relative_to(REPO)
        if skip & set(rel.parts) or rel.parts[:2] in {("saga", p) for p in ("state", "steps")}:
            continue
        if rel.parts[:2] == ("saga", "adapters") or rel.as_posix() in KEY_MODULES:
            continue
        if rel.as_posix() in REFERENCE_DESIGNS:
            continue
        out.append(path)
    return out


def test_no_module_outside_keys_formats_a_key_string() -> None:
    """Only the key schema (KEY_MODULES) spells key shapes: no other module has a hash tag
    or key-part literal."""
    found = []
    for path in _python_files():
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and _KEY_PARTS.search(node.value)
            ):
                found.append(f"{path.relative_to(REPO)}:{node.lineno}: {node.value!r}")
    assert found == []


def test_key_string_check_catches_a_formatted_key() -> None:
    """The pattern flags an f-string hash tag and a key-part literal, not ordinary text."""
    tree = ast.parse('f"{prefix}:{{p{n}}}:saga:{rid}"\nx = f"{parser!r} must be"\n')
    hits = [
        n.value
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and _KEY_PARTS.search(n.value)
    ]
    assert hits == [":{p", "}:saga:"]
