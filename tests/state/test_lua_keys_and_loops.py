"""Static checks of the Lua scripts' keys and loops: every key a script touches comes
from KEYS (so one hash tag covers a script, as Redis Cluster needs), and every loop is
bounded (a script blocks the server while it runs).

No Redis needed: the scripts are scanned by ``tests.state.lua_scan``.
"""

from __future__ import annotations

import re

import pytest

from saga.state.scripts import SCRIPT_NAMES
from tests.state.lua_scan import (
    Function,
    blank_strings,
    enclosing,
    functions,
    is_name,
    matching,
    split_args,
)
from tests.state.lua_source import body

KEYLESS = {"TIME"}
SAME_SLOT = {"claim_steps": {"saga", "hist", "pages_key"}}
"""Keys a script builds itself, in KEYS[1]'s slot by construction: claim_steps claiming
in the read names each saga it read from the stream's own base, which it checks holds a
hash tag and begins KEYS[1] (test_claim_read checks the refusal)."""
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
    key_locals = _key_locals(code) | SAME_SLOT.get(name, set())
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
        if raw_cmd == "'XREADGROUP'":  # its key comes after STREAMS
            words = [raw[a[1] : a[1] + len(a[0])] for a in args]
            at = words.index("'STREAMS'") + 1 if "'STREAMS'" in words else len(args)
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
        ("commit_steps", "redis.call('XACK', ready,", "redis.call('XACK', 'x:' .. ready,"),
        ("commit_steps", "history_append(hist, maxlen,", "history_append(ARGV[1], maxlen,"),
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
