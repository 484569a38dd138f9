"""The OpenAPI document covers exactly the API's routes; the timeline and cost chart
geometry (pure functions, no server)."""

from __future__ import annotations

import jsonschema
import msgspec

from saga.console.api import PREFIX, routes
from saga.console.draw import WIDTH, cost_chart, nice_max, timeline
from saga.console.openapi import document
from saga.state.model import EventType, HistoryEvent, Saga, SagaState


def test_openapi_documents_every_api_route_and_no_other() -> None:
    """Each /api/v1 route and method is in the document, each path of it is a route, and
    the document is valid OpenAPI-flavoured JSON Schema (every $ref resolves)."""
    served = {(r.path.removeprefix(PREFIX), m.lower()) for r in routes() for m in r.methods or ()
              if m != "HEAD"}  # fmt: skip
    doc = document()
    documented = {(path, method) for path, ops in doc["paths"].items() for method in ops}
    assert served == documented
    assert doc["openapi"] == "3.1.0"
    schemas = doc["components"]["schemas"]
    for name in schemas:
        root = {"$ref": f"#/components/schemas/{name}", "components": doc["components"]}
        jsonschema.Draft202012Validator.check_schema(root)
    refs = {v for _, v in _refs(doc) if v.startswith("#/components/")}
    assert refs and all(r.removeprefix("#/components/schemas/") in schemas for r in refs)
    assert schemas["SagaSummary"]["additionalProperties"] is False  # the CLI's strict schema


def _refs(node: object) -> list[tuple[str, str]]:
    if isinstance(node, dict):
        out = [("$ref", node["$ref"])] if "$ref" in node else []
        return out + [r for v in node.values() for r in _refs(v)]
    if isinstance(node, list):
        return [r for v in node for r in _refs(v)]
    return []


def _event(kind: EventType, at: int, **f: object) -> HistoryEvent:
    return HistoryEvent(id=f"{at}-0", event=kind, at_ms=at, step="router", epoch=1, **f)  # type: ignore[arg-type]


def test_timeline_bars_sit_on_one_axis_in_history_order() -> None:
    """A retried step: the failed attempt's bar, then the marker of its promotion, then
    the committing attempt's bar; positions proportional to time on a 1000-unit axis."""
    saga = Saga(v=1, record_id="r", user_id="u", state=SagaState.COMPLETED, step="router",
                epoch=1, created_ms=1000, updated_ms=3000)  # fmt: skip
    events = [
        _event(EventType.STARTED, 1000),
        _event(EventType.RETRY_SCHEDULED, 1500, attempt=1, worker="w", duration_ms=500,
               error_class="TimeoutError", error_message="slow"),
        _event(EventType.PROMOTED, 2000),
        _event(EventType.COMMITTED, 3000, attempt=2, worker="w", duration_ms=1000, cost=0.5),
    ]  # fmt: skip
    rows = timeline(saga, events, now_ms=9999)
    assert [(r.attempt, r.outcome) for r in rows] == [
        (False, "started"), (True, "retry"), (False, "promoted"), (True, "ok")]  # fmt: skip
    retry, ok = rows[1], rows[3]
    assert (retry.x, retry.w) == (0.0, 250.0)
    assert (ok.x, ok.w) == (500.0, 500.0)
    assert rows[2].x == 500.0 and ok.x + ok.w == WIDTH
    assert retry.error == "TimeoutError: slow" and ok.cost == "$0.5000"
    assert rows[0].start == "00:00:01.000" and retry.duration == "500ms"


def test_cost_chart_scales_to_a_round_top() -> None:
    """Bars grow from the axis in proportion to a round maximum; every day has a bar."""
    assert [nice_max(v) for v in (0, 0.7, 1, 1.2, 2.2, 3, 7, 0.00013)] == [
        0, 1, 1, 2, 2.5, 5, 10, 0.0002]  # fmt: skip
    days = [{"day": f"2026-11-{d:02d}", "usd": usd} for d, usd in ((1, 0.0), (2, 1.0), (3, 2.5))]
    chart = cost_chart(days)
    assert chart.top == "$2.50"
    heights = [b.h for b in chart.bars]
    assert heights[0] == 0 and heights[2] == 170.0 and heights[1] == 68.0
    assert all(b.y + b.h == 178.0 for b in chart.bars)
    assert [label for _, label in chart.labels] == ["11-01", "11-02", "11-03"]


def test_a_maps_item_undos_have_a_row_each() -> None:
    """A compensation of a map: each item's undo is a row of its own (undo:parse[1],
    then undo:parse[0]), as each item's attempt is."""
    saga = Saga(v=1, record_id="r", user_id="u", state=SagaState.COMPENSATED,
                step="undo:parse", epoch=2, created_ms=1000, updated_ms=3000)  # fmt: skip

    def done(step: str, at: int, item: int) -> HistoryEvent:
        e = _event(EventType.COMMITTED, at, attempt=1, worker="w", duration_ms=10, item=item)
        return msgspec.structs.replace(e, step=step)

    events = [done("parse", 1000, 0), done("parse", 1100, 1), _event(EventType.COMPENSATING, 2000),
              done("undo:parse", 2500, 1), done("undo:parse", 3000, 0)]  # fmt: skip
    rows = [r.step for r in timeline(saga, events, now_ms=9999) if r.attempt]
    assert rows == ["parse[0]", "parse[1]", "undo:parse[1]", "undo:parse[0]"]
