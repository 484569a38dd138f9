"""A small Lua scanner for the static checks of the scripts: comments stripped, string
literals found, function bodies delimited, call arguments split at the top level.

It only needs to understand the subset of Lua our scripts use (no long strings, no
``goto``); anything it does not recognise makes a check fail rather than pass.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class Literal:
    value: str
    start: int
    end: int


def strip_comments(src: str) -> str:
    """Blank out comments (keeping offsets and newlines), leaving strings intact."""
    out = list(src)
    i, n = 0, len(src)
    while i < n:
        c = src[i]
        if c in "'\"":
            i = _string_end(src, i)
            continue
        if src.startswith("--", i):
            if src.startswith("--[[", i):
                raise ValueError("long comments are not used in our scripts")
            j = src.find("\n", i)
            j = n if j == -1 else j
            for k in range(i, j):
                out[k] = " "
            i = j
            continue
        if src.startswith("[[", i):
            raise ValueError("long strings are not used in our scripts")
        i += 1
    return "".join(out)


def _string_end(src: str, i: int) -> int:
    quote, j = src[i], i + 1
    while j < len(src):
        if src[j] == "\\":
            j += 2
            continue
        if src[j] == quote:
            return j + 1
        if src[j] == "\n":
            raise ValueError(f"unterminated string at offset {i}")
        j += 1
    raise ValueError(f"unterminated string at offset {i}")


def literals(code: str) -> list[Literal]:
    """String literals of comment-free code, with their offsets."""
    found, i = [], 0
    while i < len(code):
        if code[i] in "'\"":
            j = _string_end(code, i)
            found.append(Literal(code[i + 1 : j - 1], i, j))
            i = j
        else:
            i += 1
    return found


def blank_strings(code: str) -> str:
    """Replace the inside of every string literal by spaces (keeps offsets)."""
    out = list(code)
    for lit in literals(code):
        for k in range(lit.start + 1, lit.end - 1):
            out[k] = " "
    return "".join(out)


def matching(code: str, open_at: int) -> int:
    """Offset just past the bracket closing the one at ``open_at`` (strings blanked)."""
    pairs = {"(": ")", "{": "}", "[": "]"}
    stack = [pairs[code[open_at]]]
    for j in range(open_at + 1, len(code)):
        c = code[j]
        if c in pairs:
            stack.append(pairs[c])
        elif c in ")}]":
            if c != stack.pop():
                raise ValueError(f"unbalanced {c!r} at {j}")
            if not stack:
                return j + 1
    raise ValueError(f"unclosed bracket at {open_at}")


def split_args(code: str, open_at: int) -> list[tuple[str, int]]:
    """Top-level comma-separated pieces inside the bracket at ``open_at`` (text, offset)."""
    end = matching(code, open_at)
    pieces, depth, start = [], 0, open_at + 1
    for j in range(open_at + 1, end - 1):
        c = code[j]
        if c in "({[":
            depth += 1
        elif c in ")}]":
            depth -= 1
        elif c == "," and depth == 0:
            pieces.append((code[start:j], start))
            start = j + 1
    last = code[start : end - 1]
    if last.strip():
        pieces.append((last, start))
    return [(p.strip(), off + len(p) - len(p.lstrip())) for p, off in pieces]


@dataclass
class Function:
    name: str
    params: list[str]
    start: int
    end: int
    key_params: set[tuple[int, str | None]] = field(default_factory=set)
    """(parameter index, table field or None) used as a Redis key."""


_KEYWORD = re.compile(r"\b(function|if|do|end|repeat|until|while)\b")
_FUNC = re.compile(r"\blocal\s+function\s+(\w+)\s*\(([^)]*)\)")


def functions(code: str) -> dict[str, Function]:
    """``local function`` definitions and the span of their bodies (strings blanked)."""
    out = {}
    for m in _FUNC.finditer(code):
        depth, end = 0, None
        for k in _KEYWORD.finditer(code, m.start()):
            word = k.group(1)
            if word in ("repeat", "until", "while"):
                raise ValueError(f"{word} loops are not allowed in scripts")
            if word in ("function", "if", "do"):
                depth += 1
            elif word == "end":
                depth -= 1
                if depth == 0:
                    end = k.end()
                    break
        if end is None:
            raise ValueError(f"no end for function {m.group(1)}")
        params = [p.strip() for p in m.group(2).split(",") if p.strip()]
        out[m.group(1)] = Function(m.group(1), params, m.end(), end)
    return out


def enclosing(funcs: dict[str, Function], offset: int) -> Function | None:
    inside = [f for f in funcs.values() if f.start <= offset < f.end]
    return min(inside, key=lambda f: f.end - f.start) if inside else None


def is_name(text: str) -> bool:
    return _NAME.fullmatch(text) is not None
