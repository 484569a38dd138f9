"""What the console's review page and API read and do: a saga's review (its items, the
version read), one decision as a reviewer (audited, with the person as the author in
history), the source page of an item, and the review queue.

Decisions go through ``saga.documents.review`` (so through ``decide_review.lua`` and its version
check): a reviewer who decided on a version another reviewer has moved past gets a
conflict, never an overwrite.
"""

from __future__ import annotations

from typing import Any

import msgspec

from saga.console import review_source as source
from saga.console.auth import Identity
from saga.console.errors import ConsoleError
from saga.console.service import Service, _audited
from saga.documents import review
from saga.state.keys import Keys
from saga.state.machine import StateMachine
from saga.steps.models import Biomarker
from saga.steps.review import Fix, Item, Kind

FIX_FIELDS = ("name", "value", "unit", "range", "flag", "line")


async def steps_of(svc: Service, keys: Keys) -> list[str]:
    if keys.saga_type == svc.keys.saga_type:
        return list(svc.pipeline.names)
    from saga.state.types import type_info

    info = await type_info(svc.redis, svc.keys, keys.saga_type)
    return list(info.steps) if info is not None else []


async def load(svc: Service, record_id: str, saga_type: str | None = None) -> review.ReviewView:
    """``saga review show --json`` of the saga."""
    keys = await svc.typed(saga_type)
    return await review.load(svc.redis, keys, record_id, await steps_of(svc, keys))


async def decide(
    svc: Service,
    who: Identity,
    record_id: str,
    item: str,
    kind: str,
    *,
    version: int | None,
    fix: Fix | None,
    note: str,
    saga_type: str | None = None,
) -> review.DecideResult:
    """One decision by ``who`` (``saga review <kind> --json``); ConsoleError for a bad one."""
    try:
        k = Kind(kind)
    except ValueError:
        raise ConsoleError("kind must be accept, correct, reject or add") from None
    keys = await svc.typed(saga_type)
    sm = svc.sagas.sm if keys == svc.keys else StateMachine(svc.redis, keys, svc.settings.limits)
    with _audited(who, f"review_{k.value}", record_id, item=item):
        try:
            return await review.decide(sm, record_id, await steps_of(svc, keys), item, k,
                                       actor=who.actor, version=version, fix=fix,
                                       note=note)  # fmt: skip
        except ValueError as exc:
            raise ConsoleError(f"{exc}.") from None


def fix_of(fields: dict[str, str], page: int) -> Fix | None:
    """The reviewer's values from a form or a JSON body; None when none was given."""
    fix = Fix(**{f: fields.get(f, "").strip() for f in FIX_FIELDS}, page=page)
    return None if fix == Fix() else fix


def find(view: review.ReviewView, item_id: str) -> Item | None:
    return next((i for i in view.items if i.id == item_id), None)


def chosen(view: review.ReviewView, item_id: str) -> Item | None:
    """The item the page shows beside its source: the one asked for, else the first
    flagged item still undecided, else the first with a page."""
    if item_id and (found := find(view, item_id)):
        return found
    undecided = [i for i in view.items if i.flagged and i.decision is None and i.provenance]
    located = [i for i in view.items if i.provenance]
    first = undecided or located
    return first[0] if first else None


async def page_png(
    svc: Service, cache: source.PageCache, record_id: str, item: Item | None, page: int,
    saga_type: str | None = None,
) -> source.Drawn | None:  # fmt: skip
    """Page ``page`` of the saga's document with ``item``'s line highlighted (when the
    item is on that page and its line was found), from the cache when it was drawn
    before."""
    from saga.state.reads import get_saga

    keys = await svc.typed(saga_type)
    s = await get_saga(svc.redis, keys, record_id)
    on_page = item is not None and item.provenance is not None and item.provenance.page == page
    where = source.Where(item.provenance if on_page and item else None)
    key = source.cache_key(f"{keys.saga_type}\0{record_id}\0{s.document}", s.epoch, page, where)
    hit, png = cache.get(key)
    if not hit:
        png = await source.page_png(svc.settings, s.document, page, where)
        cache.put(key, png)
    return png


def page_cache(app: Any) -> source.PageCache:
    """The app's cache of drawn pages, made at first use."""
    cache = getattr(app.state, "review_pages", None)
    if cache is None:
        cache = app.state.review_pages = source.PageCache()
    return cache  # type: ignore[no-any-return]


class DecisionRow(msgspec.Struct, frozen=True, kw_only=True):
    """One decision of the saga's history, as the review page's audit trail shows it."""

    at_ms: int
    summary: str
    by: str
    note: str
    old: str
    new: str


def value_text(b: Biomarker | None) -> str:
    if b is None:
        return "—"
    value = b.value_text or ("" if b.value is None else f"{b.value:g}")
    extra = ", ".join(x for x in (b.reference_text, b.flag.value if b.flag.value != "unknown"
                                  else "") if x)  # fmt: skip
    return " ".join(x for x in (b.name, value, b.unit) if x) + (f" ({extra})" if extra else "")


async def decisions(
    svc: Service, record_id: str, saga_type: str | None = None
) -> list[DecisionRow]:
    """Every review decision in the saga's history, oldest first, with the old and the
    new value (opened when sealed): the audit trail."""
    from saga.state.model import EventType
    from saga.state.reads import get_history
    from saga.state.review import open_event
    from saga.steps.review import Decision

    keys = await svc.typed(saga_type)
    found = []
    for e in await get_history(svc.redis, keys, record_id):
        if e.event != EventType.REVIEW_DECIDED or not e.review_decision:
            continue
        try:
            d = msgspec.json.decode(open_event(keys, e.review_decision), type=Decision)
        except (msgspec.DecodeError, msgspec.ValidationError, ValueError):
            continue
        found.append(DecisionRow(at_ms=e.at_ms, summary=e.detail, by=d.by, note=d.note,
                                 old=value_text(d.old), new=value_text(d.new)))  # fmt: skip
    return found
