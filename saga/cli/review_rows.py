"""A review's items as rows of text: what ``saga review show`` prints and the console's
review page shows, cell by cell, so both read alike."""

from __future__ import annotations

import msgspec

from saga.documents.review import ReviewView
from saga.steps.models import Biomarker
from saga.steps.review import Item

HEADERS = ("item", "kind", "name", "canonical", "value", "unit", "range", "flag", "page",
           "checks", "reasons", "decision")  # fmt: skip


class ItemRow(msgspec.Struct, frozen=True, kw_only=True):
    """One item's cells (the value shown is the latest decision's, else the machine's)."""

    id: str
    kind: str
    name: str
    canonical: str
    value: str
    unit: str
    range: str
    flag: str
    page: int
    line: str
    start: int
    end: int
    checks: str
    reasons: str
    decision: str
    flagged: bool
    undecided: bool


def shown(item: Item) -> Biomarker | None:
    """The value as it stands: the latest decision's (None once rejected), else the
    machine's."""
    d = item.decision
    if d is not None:
        return d.new
    return item.value


def row(item: Item) -> ItemRow:
    b, p, d = shown(item), item.provenance, item.decision
    if b is None:  # rejected: the value as it was, struck through where it is shown
        b = (d.old if d is not None else None) or item.value
    decision = f"{d.kind.value} by {d.by}" if d is not None else ""
    if d is not None and d.note:
        decision += f" ({d.note})"
    value = (b.value_text or ("" if b.value is None else f"{b.value:g}")) if b else ""
    return ItemRow(
        id=item.id, kind=item.kind, name=b.name if b else "", value=value,
        canonical=b.canonical_name if b else "", unit=b.unit if b else "",
        range=b.reference_text if b else "", flag=str(b.flag.value) if b else "",
        page=p.page if p else 0, line=p.line if p else "", start=p.start if p else 0,
        end=p.end if p else 0, checks=", ".join(p.vouched_by) if p else "",
        reasons="; ".join(item.reasons), decision=decision, flagged=item.flagged,
        undecided=item.flagged and d is None,
    )  # fmt: skip


def rows(view: ReviewView) -> list[ItemRow]:
    return [row(i) for i in view.items]


def cells(r: ItemRow) -> list[str]:
    mark = "*" if r.undecided else ""
    name = r.name or (f"({r.line})" if r.kind == "line" else "")
    return [r.id + mark, r.kind, name, r.canonical, r.value, r.unit, r.range, r.flag,
            str(r.page or ""), r.checks, r.reasons, r.decision]  # fmt: skip


def heading(view: ReviewView) -> str:
    """One line: the step, where the review stands, and the version to decide against."""
    if view.complete:
        where = "complete"
    else:
        where = f"{view.undecided} flagged item(s) to decide (marked *)"
    reason = f": {view.reason}" if view.reason else ""
    return (f"saga {view.record_id}: review of {view.step}{reason}; {where}; "
            f"version {view.version}")  # fmt: skip
