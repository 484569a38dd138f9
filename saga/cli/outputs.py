"""``saga show --output``: what each step committed, for people and for scripts.

Outputs are read as plain JSON and drawn by their shape, so a step added to the
pipeline shows up without code here: an ``extraction`` (the parser's) becomes
tables of results with their page, rejected values and coverage; ``groups`` (the
grouper's) a table of groups; anything else ``key: value`` lines.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from saga.cli.common import table
from saga.cli.tables import clip

CELL = 40
"""Longest text cell in an output table (names, reasons, ranges); the rest is cut with …."""


def decoded(outputs: Mapping[str, str]) -> dict[str, Any]:
    """Step -> its output as JSON values (a raw string when it is not JSON)."""
    out: dict[str, Any] = {}
    for step, raw in outputs.items():
        try:
            out[step] = msgspec.json.decode(raw)
        except msgspec.DecodeError:
            out[step] = raw
    return out


def render_outputs(outputs: Mapping[str, str], undone: Mapping[str, str] | None = None) -> str:
    """Every step's output, in the order the steps committed them; then the outputs a
    compensation undid (their effect no longer stands), marked so."""
    if not outputs and not undone:
        return "no step has committed an output yet"
    blocks = []
    for step, value in decoded(outputs).items():
        blocks.append(f"== {step} ==\n" + _render(value))
    for step, value in decoded(undone or {}).items():
        blocks.append(f"== {step} (undone by its compensation) ==\n" + _render(value))
    return "\n\n".join(blocks)


def _render(value: Any) -> str:
    if isinstance(value, dict) and isinstance(value.get("extraction"), dict):
        return _extraction(value["extraction"], str(value.get("review") or ""))
    if isinstance(value, dict) and isinstance(value.get("groups"), list):
        return _groups(value["groups"], value)
    if isinstance(value, dict):
        return "\n".join(f"{k}: {_scalar(v)}" for k, v in value.items())
    return _scalar(value)


def _scalar(v: Any) -> str:
    if isinstance(v, str | int | float | bool) or v is None:
        return str(v)
    return clip(msgspec.json.encode(v).decode(), 200)


def _value(b: Mapping[str, Any]) -> str:
    text = str(b.get("value_text") or "")
    if text:
        return text
    value = b.get("value")
    return "" if value is None else f"{b.get('comparator') or ''}{value:g}"


def _page(item: Mapping[str, Any]) -> str:
    prov = item.get("provenance")
    return str(prov.get("page", "")) if isinstance(prov, dict) else ""


def _extraction(x: Mapping[str, Any], review: str) -> str:
    parts = []
    if review:
        parts.append(f"review: {review}")
    results = [
        [
            clip(str(b.get("name", "")), CELL),
            clip(str(b.get("canonical_name") or "-"), CELL),
            _value(b),
            str(b.get("unit") or ""),
            str(b.get("flag") or ""),
            clip(str(b.get("reference_text") or ""), CELL),
            _page(b),
            clip("; ".join(b.get("warnings") or []), CELL),
        ]
        for b in x.get("biomarkers") or []
    ]
    headers = ["name", "canonical", "value", "unit", "flag", "range", "page", "warnings"]
    parts.append(f"biomarkers ({len(results)})\n" + table(headers, results) if results else "")
    rejected = [
        [
            clip(str(r.get("name", "")), CELL),
            str(r.get("value_text") or ""),
            str(r.get("unit") or ""),
            _page(r),
            clip(str(r.get("reason", "")), 2 * CELL),
        ]
        for r in x.get("rejected") or []
    ]
    if rejected:
        headers = ["name", "value", "unit", "page", "reason"]
        parts.append(f"rejected ({len(rejected)})\n" + table(headers, rejected))
    for key, fields in (
        ("diagnoses", ("name", "code")),
        ("procedures", ("name", "date")),
        ("genetics", ("gene", "variant", "interpretation")),
    ):
        rows = [[clip(str(i.get(f) or ""), CELL) for f in fields] for i in x.get(key) or []]
        if rows:
            parts.append(f"{key} ({len(rows)})\n" + table(list(fields), rows))
    parts.append(_coverage(x.get("coverage")))
    return "\n\n".join(p for p in parts if p)


def _coverage(c: Any) -> str:
    if not isinstance(c, dict):
        return ""
    total, explained = int(c.get("candidate_lines") or 0), int(c.get("explained_lines") or 0)
    if not total:
        return "coverage: no result-like lines"
    line = f"coverage: {explained} of {total} result-like lines explained ({explained / total:.0%})"
    missed = [
        f"  p{u.get('page', '?')}: {clip(str(u.get('line', '')), 2 * CELL)}"
        for u in c.get("unexplained") or []
        if isinstance(u, dict)
    ]
    return "\n".join([line, *(["not explained:", *missed] if missed else [])])


def _groups(groups: list[Any], output: Mapping[str, Any]) -> str:
    rows = [
        [
            clip(str(g.get("canonical_name", "")), CELL),
            clip(", ".join(_member(g, m) for m in g.get("members") or []), 2 * CELL),
            str(len(g.get("biomarkers") or [])),
        ]
        for g in groups
        if isinstance(g, dict)
    ]
    model = output.get("embedding_model")
    notes = [f"grouped by embeddings: {model}"] if model else []
    notes += [f"warning: {w}" for w in output.get("warnings") or []]
    if not rows:
        return "\n".join(["no groups", *notes])
    head = f"groups ({len(rows)})\n" + table(["canonical name", "members", "results"], rows)
    return "\n".join([head, *notes])


def _member(group: Mapping[str, Any], member: Any) -> str:
    """A member name, with the similarity it joined by when embeddings put it there."""
    for source in group.get("sources") or []:
        if (
            isinstance(source, dict)
            and source.get("name") == member
            and source.get("joined_by") == "embedding"
        ):
            return f"{member} (embedding {float(source.get('score') or 0):.2f})"
    return str(member)
