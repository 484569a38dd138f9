"""A person's review of a parser output, as plain functions: the items to decide, and
the reviewed output the decisions make.

Items are named by kind and position in the machine's output: ``b<i>`` an accepted
value, ``r<i>`` a rejected one, ``u<i>`` an unexplained result-like line, ``a<n>`` a
value the reviewer added. Flagged (to be decided before the review completes): every
rejected value, every unexplained line, and every value with a warning or that no
check could vouch for. The reviewed output is the machine's with each decision
applied; a corrected value keeps the machine's reading in ``reviewed.machine``.
"""

from __future__ import annotations

import re
from enum import StrEnum

import msgspec
from msgspec.structs import replace

from saga.steps.lab_values import comparator_of, parse_range
from saga.steps.models import Biomarker, Flag, ParserOutput, Provenance, Reviewed
from saga.steps.synonyms import canonical_name


class Kind(StrEnum):
    ACCEPT = "accept"
    CORRECT = "correct"
    REJECT = "reject"
    ADD = "add"


class Fix(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A reviewer's values (correct, add): as written; "" keeps the machine's."""

    name: str = ""
    value: str = ""
    unit: str = ""
    range: str = ""
    flag: str = ""
    page: int = 0
    line: str = ""


class Decision(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    item: str
    kind: Kind
    by: str
    at_ms: int
    fix: Fix | None = None
    note: str = ""
    old: Biomarker | None = None
    """The value before the decision (the machine's, or an earlier decision's)."""
    new: Biomarker | None = None
    """The value after it; None for a rejection."""


class Decisions(msgspec.Struct, frozen=True, kw_only=True):
    """Every decision of one review, kept under ``rvd:<step>``."""

    epoch: int
    """The saga's epoch when the review began: a decision set of an earlier output
    (the step re-ran since) is not this output's."""
    decisions: list[Decision] = []
    complete: bool = False


class Item(msgspec.Struct, frozen=True, kw_only=True):
    id: str
    kind: str
    """value | rejected | line | added"""
    value: Biomarker | None
    provenance: Provenance | None
    flagged: bool
    reasons: list[str]
    decision: Decision | None = None


def _unverified(p: Provenance | None) -> bool:
    return bool(getattr(p, "unverified", False))


def items(out: ParserOutput, made: Decisions | None) -> list[Item]:
    """Every item of the output, each with its latest decision."""
    last = {d.item: d for d in (made.decisions if made else [])}
    ex, found = out.extraction, []
    for i, b in enumerate(ex.biomarkers):
        why = list(b.warnings) + (["no check vouched for it"] if _unverified(b.provenance) else [])
        found.append(Item(id=f"b{i}", kind="value", value=b, provenance=b.provenance,
                          flagged=bool(why), reasons=why, decision=last.get(f"b{i}")))  # fmt: skip
    for i, r in enumerate(ex.rejected):
        b = Biomarker(name=r.name, unit=r.unit, provenance=r.provenance,
                      canonical_name=canonical_name(r.name) or "")  # fmt: skip
        b = _with(b, Fix(value=r.value_text)) if r.value_text else b
        d = last.get(f"r{i}")
        found.append(Item(id=f"r{i}", kind="rejected", value=b, provenance=r.provenance,
                          flagged=True, reasons=[r.reason], decision=d))  # fmt: skip
    for i, line in enumerate(ex.coverage.unexplained):
        why = ["no value explains this line"]
        found.append(Item(id=f"u{i}", kind="line", value=None, provenance=line, flagged=True,
                          reasons=why, decision=last.get(f"u{i}")))  # fmt: skip
    for a in _added_ids(made):
        d = last[a]
        first = next(x for x in made.decisions if x.item == a)  # type: ignore[union-attr]
        where = first.new.provenance if first.new else None
        found.append(Item(id=a, kind="added", value=d.new or first.new, provenance=where,
                          flagged=False, reasons=[], decision=d))  # fmt: skip
    return found


def _added_ids(made: Decisions | None) -> list[str]:
    """The ids of added values, in the order they were added."""
    ids: list[str] = []
    for d in made.decisions if made else []:
        if d.item.startswith("a") and d.item not in ids:
            ids.append(d.item)
    return ids


def undecided(found: list[Item]) -> list[Item]:
    return [i for i in found if i.flagged and i.decision is None]


def allowed(item: Item, kind: Kind) -> str:
    """Why ``kind`` cannot be decided on ``item`` ("" when it can)."""
    if item.kind == "line" and kind not in (Kind.ADD, Kind.REJECT):
        return "an unexplained line can be added as a value or rejected (not a result)"
    if item.kind == "new":
        return "" if kind == Kind.ADD else "only a missed value is added as item 'new'"
    if item.kind != "line" and kind == Kind.ADD:
        return "add a missed value with its page and line (item 'new')"
    return ""


def decide(item: Item, kind: Kind, by: str, at_ms: int, fix: Fix | None, note: str) -> Decision:
    """The decision with its old and new value; ValueError for an unusable fix."""
    old = (item.decision.new if item.decision is not None else None) or item.value
    if old is None and kind in (Kind.ACCEPT, Kind.CORRECT):
        raise ValueError(f"item {item.id} has no value to {kind.value}")
    if kind == Kind.REJECT:
        new = None
    elif kind == Kind.ACCEPT:
        new = replace(old, reviewed=Reviewed(decision="accepted", by=by, at_ms=at_ms))  # type: ignore[type-var]
    elif kind == Kind.CORRECT:
        new = corrected(old, fix or Fix(), by, at_ms)  # type: ignore[arg-type]
    else:
        new = added(fix or Fix(), item.provenance, by, at_ms)
    return Decision(item=item.id, kind=kind, by=by, at_ms=at_ms, fix=fix, note=note,
                    old=old, new=new)  # fmt: skip


def corrected(old: Biomarker, fix: Fix, by: str, at_ms: int) -> Biomarker:
    machine = old.reviewed.machine if old.reviewed and old.reviewed.machine else old
    b = _with(old, fix)
    return replace(b, reviewed=Reviewed(decision="corrected", by=by, at_ms=at_ms,
                                        machine=replace(machine, reviewed=None)))  # fmt: skip


def added(fix: Fix, where: Provenance | None, by: str, at_ms: int) -> Biomarker:
    if not fix.name or not fix.value:
        raise ValueError("a missed value needs at least its name and value")
    page = fix.page or (where.page if where else 0)
    line = fix.line or (where.line if where else "")
    if page < 1 or not line:
        raise ValueError("a missed value needs its page and line")
    at = line.find(fix.value)
    prov = Provenance(
        page=page, line=line, start=max(at, 0), end=at + len(fix.value) if at >= 0 else 0
    )
    b = _with(Biomarker(name=fix.name, provenance=prov), fix)
    return replace(b, reviewed=Reviewed(decision="added", by=by, at_ms=at_ms))


_NUMBER = re.compile(r"^\s*(?P<cmp>[<>]=?|≤|≥)?\s*(?P<num>-?\d+(?:[.,]\d+)?)\s*$")


def _with(b: Biomarker, fix: Fix) -> Biomarker:
    """``b`` with the fix's non-empty fields, parsed as the parser would."""
    if fix.name:
        b = replace(b, name=" ".join(fix.name.split())[:200],
                    canonical_name=canonical_name(fix.name) or "")  # fmt: skip
    if fix.value:
        m = _NUMBER.match(fix.value)
        value = float(m.group("num").replace(",", ".")) if m else None
        cmp = comparator_of(m.group("cmp") or "") if m else ""
        b = replace(b, value=value, value_text=fix.value.strip(), comparator=cmp)
    if fix.unit:
        b = replace(b, unit=fix.unit.strip())
    if fix.range:
        rng = parse_range(fix.range)
        if rng is None:
            raise ValueError(f"the range {fix.range!r} is not 'low - high', '< x' or '> x'")
        b = replace(b, reference_text=rng.text, reference_low=rng.low, reference_high=rng.high)
    if fix.flag:
        try:
            b = replace(b, flag=Flag("" if fix.flag == "unknown" else fix.flag))
        except ValueError:
            raise ValueError("the flag must be high, low, normal or unknown") from None
    return b


def reviewed_output(out: ParserOutput, made: Decisions) -> ParserOutput:
    """The machine's output with every decision applied, flagged for nothing."""
    last = {d.item: d for d in made.decisions}
    ex = out.extraction
    values = []
    for i, b in enumerate(ex.biomarkers):
        d = last.get(f"b{i}")
        if d is None:
            values.append(b)
        elif d.new is not None:
            values.append(d.new)
    rejected = [r for i, r in enumerate(ex.rejected) if not _taken(last.get(f"r{i}"))]
    for i in range(len(ex.rejected)):
        d = last.get(f"r{i}")
        if _taken(d):
            values.append(d.new)  # type: ignore[union-attr,arg-type]
    for i in range(len(ex.coverage.unexplained)):
        d = last.get(f"u{i}")
        if _taken(d):
            values.append(d.new)  # type: ignore[union-attr,arg-type]
    added = [last[a].new for a in _added_ids(made)]
    values += [b for b in added if b is not None]
    extraction = msgspec.structs.replace(ex, biomarkers=values, rejected=rejected)
    return ParserOutput.of(extraction, review="")


def _taken(d: Decision | None) -> bool:
    return d is not None and d.new is not None
