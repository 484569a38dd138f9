"""Static checks of the Lua scripts against the Python model: names, codes, states, keys, loops.

No Redis needed: the scripts are read from the package (raw files) and rendered by the
loader (preamble + includes), then scanned by ``tests.state.lua_scan``.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import saga.state
from saga.state import codes
from saga.state.codes import RC
from saga.state.model import EventType, SagaState
from saga.state.scripts import SCRIPT_NAMES, _preamble, render
from tests.state.lua_scan import (
    Function,
    blank_strings,
    enclosing,
    functions,
    is_name,
    literals,
    matching,
    split_args,
    strip_comments,
)

LUA = Path(saga.state.__file__).resolve().parent / "lua"
REPO = Path(__file__).resolve().parents[2]
RAW = {p.relative_to(LUA).as_posix(): p.read_text() for p in sorted(LUA.rglob("*.lua"))}
REFUSALS = [c for c in RC if c not in (RC.OK, RC.DUPLICATE)]
KEYLESS = {"TIME"}
SUBCOMMAND_FIRST = {"XGROUP", "XINFO"}
"""Commands whose key comes after a subcommand (XGROUP DELCONSUMER <key> ...)."""


def _is_keys_index(expr: str) -> bool:
    """``KEYS[<anything balanced>]`` and nothing after it."""
    if not expr.startswith("KEYS["):
        return False
    try:
        return matching(expr, 4) == len(expr)
    except ValueError:
        return False


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
    for i, state in enumerate(SagaState):
        assert f"{state.name}='{state.value}'" in pre
        assert f"{state.value}={i}" in pre


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


# -- keys -------------------------------------------------------------------------
def _key_locals(code: str) -> set[str]:
    names: set[str] = set()
    for m in re.finditer(r"\blocal[ \t]+([\w \t,]+?)[ \t]*=[ \t]*([^\n]+)", code):
        targets = [t.strip() for t in m.group(1).split(",")]
        try:
            exprs = [e for e, _ in split_args("(" + m.group(2) + ")", 0)]
        except ValueError:  # a statement that goes on over several lines: not a KEYS binding
            continue
        for target, expr in zip(targets, exprs, strict=False):
            if _is_keys_index(expr) or expr in names:
                names.add(target)
    return names


def _valid_key(expr: str, fn: Function | None, key_locals: set[str]) -> bool:
    """Is ``expr`` KEYS-derived? Marks the enclosing function's parameters it relies on."""
    if _is_keys_index(expr):
        return True
    field = re.fullmatch(r"(\w+)\.(\w+)", expr)
    if fn is not None and is_name(expr) and expr in fn.params:
        fn.key_params.add((fn.params.index(expr), None))
        return True
    if fn is not None and field and field.group(1) in fn.params:
        fn.key_params.add((fn.params.index(field.group(1)), field.group(2)))
        return True
    return is_name(expr) and expr in key_locals


def _table_field(table: str, name: str) -> str | None:
    if not table.startswith("{"):
        return None
    for piece, _ in split_args(table, 0):
        m = re.fullmatch(r"(\w+)\s*=\s*(.+)", piece, re.S)
        if m and m.group(1) == name:
            return m.group(2).strip()
    return None


def key_violations(name: str, raw: str) -> list[str]:
    """Redis calls or helper calls whose key argument is not KEYS-derived."""
    code = blank_strings(raw)
    funcs = functions(code)
    key_locals = _key_locals(code)
    bad: list[str] = []

    def where(offset: int) -> str:
        return f"{name}: line {raw.count(chr(10), 0, offset) + 1}"

    for m in re.finditer(r"\bredis\.call\s*\(", code):
        args = split_args(code, m.end() - 1)
        raw_cmd = raw[args[0][1] : args[0][1] + len(args[0][0])]
        if not re.fullmatch(r"'[A-Z]+'", raw_cmd):
            bad.append(f"{where(m.start())}: command is not a literal: {raw_cmd}")
            continue
        if raw_cmd.strip("'") in KEYLESS:
            continue
        at = 2 if raw_cmd.strip("'") in SUBCOMMAND_FIRST else 1
        key = args[at][0] if len(args) > at else ""
        if ".." in key or not _valid_key(key, enclosing(funcs, m.start()), key_locals):
            bad.append(f"{where(m.start())}: key {key!r} of {raw_cmd} is not from KEYS")
    for _ in range(len(funcs) + 1):  # propagate helper parameters to their call sites
        calls_bad = []
        for f in list(funcs.values()):
            for m in re.finditer(rf"(?<!function )\b{f.name}\s*\(", code):
                args = split_args(code, m.end() - 1)
                outer = enclosing(funcs, m.start())
                for index, fld in sorted(f.key_params, key=str):
                    arg = args[index][0] if index < len(args) else ""
                    expr = arg if fld is None else _table_field(arg, fld)
                    if expr is None or not _valid_key(expr, outer, key_locals):
                        calls_bad.append(f"{where(m.start())}: {f.name} gets key {arg!r}")
    return bad + calls_bad


@pytest.mark.parametrize("name", SCRIPT_NAMES)
def test_every_key_a_script_touches_comes_from_KEYS(name: str) -> None:
    """redis.call's key argument is KEYS[...] or a local/parameter bound from KEYS, never built."""
    assert key_violations(name, body(name)) == []


@pytest.mark.parametrize(
    ("name", "old", "new"),
    [
        ("commit_step", "redis.call('XACK', ready,", "redis.call('XACK', 'x:' .. ready,"),
        ("commit_step", "history_append(hist, maxlen,", "history_append(ARGV[1], maxlen,"),
        ("claim_steps", "dead = KEYS[3]", "dead = 'd:' .. ARGV[2]"),
        ("start_saga", "local saga, hist, ready = KEYS[1]", "local saga, hist, ready = ARGV[1]"),
    ],
)
def test_key_check_catches_keys_built_inside_a_script(name: str, old: str, new: str) -> None:
    """The key check fails on a mutated script that builds a key or takes it from ARGV."""
    code = body(name)
    assert old in code
    assert key_violations(name, code.replace(old, new, 1)) != []


# -- loops ------------------------------------------------------------------------
def _capped(name: str, code: str, before: int) -> bool:
    cap = rf"\bif\s+{re.escape(name)}\s*>\s*\d+\s+then\s+return\s+redis\.error_reply"
    return re.search(cap, code[:before]) is not None


def loop_violations(name: str, raw: str) -> list[str]:
    code = blank_strings(raw)
    bad = []
    for m in re.finditer(r"\b(for|while|repeat)\b", code):
        line = raw.count("\n", 0, m.start()) + 1
        do = re.compile(r"\bdo\b").search(code, m.start())
        stmt = code[m.start() : do.end()] if do else code[m.start() :]
        numeric = re.fullmatch(r"for\s+\w+\s*=\s*[^,]+,\s*(.+?)(?:,\s*[^,]+)?\s+do", stmt, re.S)
        generic = re.fullmatch(r"for\s+[\w\s,]+\s+in\s+i?pairs\((\w+)\)\s+do", stmt, re.S)
        if numeric:
            limit = numeric.group(1).strip()
            if limit.isdigit() or (is_name(limit) and _capped(limit, code, m.start())):
                continue
        elif generic and _bounded_reply(generic.group(1), code, raw, m.start()):
            continue
        bad.append(f"{name}: line {line}: unbounded loop: {' '.join(stmt.split())}")
    return bad


def _bounded_reply(var: str, code: str, raw: str, before: int) -> bool:
    """``var`` comes from a redis reply whose size a capped COUNT/LIMIT bounds."""
    alias = re.search(rf"\blocal\s+{var}\s*=\s*(\w+)\[\d+\](?:\s+or\s+\{{\}})?", code[:before])
    source = alias.group(1) if alias else var
    call = re.search(rf"\blocal\s+{source}\s*=\s*redis\.call\s*\(", code[:before])
    if call is None:
        return False
    args = [raw[o : o + len(a)] for a, o in split_args(code, call.end() - 1)]
    for i, arg in enumerate(args[:-1]):
        if arg in ("'COUNT'", "'LIMIT'"):
            bound = args[i + 2] if arg == "'LIMIT'" else args[i + 1]
            return bound.isdigit() or (is_name(bound) and _capped(bound, code, before))
    return False


@pytest.mark.parametrize("name", SCRIPT_NAMES)
def test_every_loop_is_bounded(name: str) -> None:
    """Numeric loops run to a capped count; generic loops walk a reply bounded by COUNT/LIMIT."""
    assert loop_violations(name, body(name)) == []


@pytest.mark.parametrize(
    ("name", "old", "new"),
    [
        ("promote_retries", "for i = 1, n do", "for i = 1, #ARGV do"),
        ("recover_idle", "for _, id in ipairs(deleted) do", "for _, id in ipairs(ARGV) do"),
        ("recover_idle", "local now = now_ms()", "while true do end local now = now_ms()"),
    ],
)
def test_loop_check_catches_unbounded_loops(name: str, old: str, new: str) -> None:
    """The loop check fails on a mutated script with an uncapped or open-ended loop."""
    code = body(name)
    assert old in code
    assert loop_violations(name, code.replace(old, new, 1)) != []


# -- key strings in Python ------------------------------------------------------
_KEY_PARTS = re.compile(r"\{p(\d+\}|$)|:(saga|ready|hist|delayed|dead|idx|pages|quarantine):")


REFERENCE_DESIGNS = {"saga/bench/minimal.py", "saga/bench/seed_protocol.py"}
"""Benchmark baselines of other designs: they own a separate keyspace, never saga's keys."""


def _python_files() -> list[Path]:
    skip = {".venv", "build", "dist", "tests", ".git", "node_modules"}
    out = []
    for path in REPO.rglob("*.py"):
        rel = path.relative_to(REPO)
        if skip & set(rel.parts) or rel.parts[:2] in {("saga", p) for p in ("state", "steps")}:
            continue
        if rel.parts[:2] == ("saga", "adapters") or rel.as_posix() == "state/keys.py":
            continue
        if rel.as_posix() in REFERENCE_DESIGNS:
            continue
        out.append(path)
    return out


def test_no_module_outside_keys_formats_a_key_string() -> None:
    """Only state/keys.py spells key shapes: no other module has a hash tag or key-part literal."""
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
