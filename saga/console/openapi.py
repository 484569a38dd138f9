"""The OpenAPI 3.1 document of ``/api/v1``, served at ``/api/v1/openapi.json``.

Component schemas come from the very Structs the CLI prints (msgspec writes their
JSON Schema), so the document cannot drift from the shapes; the envelopes around
them are written here as the CLI's ``--json`` writes them. A test checks every
route against this document and every response against its schema.
"""

from __future__ import annotations

import functools
from typing import Any

import msgspec

from saga.cli import shapes
from saga.console import api_schedules, api_start_openapi, api_start_signals
from saga.state.queries import CostRow, StateCounts

REF = "#/components/schemas/{name}"
CLI = {
    "ListDocument": "list", "ShowDocument": "show", "ShowOutputDocument": "show-output",
    "TopDocument": "top", "DeadLettersDocument": "dlq-letters", "ReplayDocument": "dlq-replay",
    "PurgeDocument": "dlq-purge", "RetryResult": "retry", "CancelResult": "cancel",
    "ReviewAccepted": "review-accept", "ReviewView": "review-show",
    "DecideResult": "review-decide", "CostsDocument": "costs",
    "BudgetsDocument": "budget-show", "BudgetCleared": "budget-clear",
    "StartDocument": "start", "ScheduleList": "schedule-list",
}  # fmt: skip
"""Component -> the CLI's ``--json`` schema it is (``saga/cli/schemas/<name>.json``)."""


def ref(name: str) -> dict[str, str]:
    return {"$ref": REF.format(name=name)}


def obj(required: list[str] | None = None, **props: Any) -> dict[str, Any]:
    return of(props, required)


def of(props: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    """An object schema; every property is required unless ``required`` says which."""
    return {"type": "object", "properties": props, "required": required or list(props),
            "additionalProperties": False}  # fmt: skip


def arr(items: dict[str, Any]) -> dict[str, Any]:
    return {"type": "array", "items": items}


STR, INT, NUM = {"type": "string"}, {"type": "integer"}, {"type": "number"}
BOOL = {"type": "boolean"}
OWN: dict[str, dict[str, Any]] = {
    "Error": obj(error=STR),
    "Me": obj(subject=STR, role={"enum": ["viewer", "reviewer", "operator", "producer"]}, via=STR),
    "SagaDetail": {"oneOf": [ref("ShowOutputDocument"), ref("ShowDocument")],
                   "description": "outputs for operators only"},
    "Counts": obj(counts=ref("StateCounts")),
    "CostsDaily": of({"from": STR, "to": STR,
                      "days": arr(obj(day=STR, usd=NUM, rows=arr(ref("CostRow"))))}),
    "Budgets": obj(budgets=arr(ref("BudgetStatus")), parked_complete=BOOL, parked={
        "type": "object", "description": "user -> saga type -> sagas parked for the budget",
        "additionalProperties": {"type": "object", "additionalProperties": INT}}),
    "BudgetSet": obj(budget=ref("BudgetStatus"), woken=INT),
    "ReviewDecision": {"oneOf": [ref("DecideResult"), ref("ReviewAccepted")],
                       "description": "one item decided; accept without item: the whole saga"},
}  # fmt: skip
"""The console's own answers (the CLI prints nothing like them)."""


def _query(name: str, about: str, schema: dict[str, Any] = STR) -> dict[str, Any]:
    return {"name": name, "in": "query", "required": False, "description": about,
            "schema": schema}  # fmt: skip


RECORD = {"name": "record_id", "in": "path", "required": True, "schema": STR}
LIST_PARAMS = [
    _query("state", "only sagas in this state; parked: waiting without spending attempts"),
    _query("step", "only sagas at this step"),
    _query("user", "only this user's sagas"), _query("review", "only sagas flagged for review"),
    _query("since", "created since: 30m, 2h, 7d or an ISO date"),
    _query("limit", "at most this many (1-500, default 50)", INT),
    _query("cursor", "where the previous page ended (from its Link header, rel=next)"),
    _query("before", "where the next page started: the page before (Link header, rel=prev)"),
    _query("sort", "created (newest created first, default) or updated (last change of state)"),
    _query("q", "a record id or its start: the sagas whose id starts so, newest first "
           "(the other filters do not apply)"),
    _query("type", "sagas of this registered saga type (default: the console's own)"),
]  # fmt: skip
USER = {"name": "user_id", "in": "path", "required": True, "schema": STR}
USD = {"type": ["number", "null"], "minimum": 0, "description": "USD; null or absent: no limit"}
TYPE = _query("type", "a saga of this registered saga type (default: the console's own)")


COST_PARAMS = [
    _query("user", "only this user"),
    _query("since", "from the day of: 7d or an ISO date (default 30 days)"),
]
NEXT = {"Link": {"description": 'the next and previous pages: <URL>; rel="next", <URL>; '
                 'rel="prev" (each absent where there is none)',
                 "schema": STR}}  # fmt: skip


def _op(summary: str, response: str, role: str, **extra: Any) -> dict[str, Any]:
    errors = {str(c): {"description": d, "content": _json(ref("Error"))}
              for c, d in ((400, "bad input"), (401, "not signed in, or an unknown token"),
                           (403, f"needs the {role} role, or a CSRF check failed"))}  # fmt: skip
    ok: dict[str, Any] = {"description": "ok", "content": _json(ref(response))}
    if "headers" in extra:
        ok["headers"] = extra.pop("headers")
    return {"summary": summary, "description": f"Role: {role}.", **extra,
            "responses": {"200": ok, **errors}}  # fmt: skip


def _conflict(op: dict[str, Any]) -> dict[str, Any]:
    """An operation whose version check can refuse it (another reviewer came first)."""
    op["responses"]["409"] = {
        "description": "another reviewer decided first (reload), or the saga is not flagged",
        "content": _json(ref("Error")),
    }
    return op


def _png(summary: str, parameters: list[dict[str, Any]]) -> dict[str, Any]:
    errors = {"401": {"description": "not signed in", "content": _json(ref("Error"))},
              "403": {"description": "needs the reviewer role", "content": _json(ref("Error"))},
              "404": {"description": "no such page, or no picture can be made",
                      "content": _json(ref("Error"))}}  # fmt: skip
    return {"summary": summary, "description": "Role: reviewer.", "parameters": parameters,
            "responses": {"200": {"description": "the page",
                                  "content": {"image/png": {"schema": {"type": "string",
                                              "contentMediaType": "image/png"}}}},
                          **errors}}  # fmt: skip


def _with(op: dict[str, Any], responses: dict[str, Any]) -> dict[str, Any]:
    return {**op, "responses": {**op["responses"], **responses}}


def _json(schema: dict[str, Any]) -> dict[str, Any]:
    return {"application/json": {"schema": schema}}


def _body(**props: Any) -> dict[str, Any]:
    return {"required": False, "content": _json(obj([], **props))}


PATHS: dict[str, dict[str, Any]] = {
    "/me": {"get": _op("who is signed in", "Me", "viewer or producer")},
    "/sagas": {"get": _op("sagas from the indexes, newest first (saga list)", "ListDocument",
                          "viewer", parameters=LIST_PARAMS, headers=NEXT),
               "post": api_start_openapi.START},
    "/counts": {"get": _op("sagas per state index", "Counts", "viewer",
                           parameters=[_query("type", "of this saga type")])},
    "/sagas/{record_id}": {"get": _with(_op(
        "a saga, its attempts and events (saga show)", "SagaDetail", "viewer or producer "
        "(outputs: operator only)", parameters=[RECORD, TYPE]), api_start_openapi.TOO_MANY)},
    "/sagas/{record_id}/retry": {"post": _op("re-run from a step (saga retry)", "RetryResult",
                                             "operator", parameters=[RECORD, TYPE],
                                             requestBody=_body(step=STR, force=BOOL,
                                                               type=STR))},
    "/sagas/{record_id}/cancel": {"post": _op(
        "cancel (saga cancel); compensate: undo the committed steps, latest first "
        "(saga cancel --compensate)", "CancelResult", "operator", parameters=[RECORD, TYPE],
        requestBody=_body(compensate=BOOL, type=STR))},
    "/sagas/{record_id}/review": {"get": _op(
        "the review of a flagged saga: every item with its page, reasons and decision, and "
        "the version to decide against (saga review show)", "ReviewView", "reviewer",
        parameters=[RECORD, TYPE])},
    "/sagas/{record_id}/review/{kind}": {"post": _conflict(_op(
        "decide one item: accept, correct, reject or add (saga review <kind> <record> <item>); "
        "accept without item accepts the flagged results whole (saga review accept, operator "
        "role)", "ReviewDecision", "reviewer",
        parameters=[RECORD, {"name": "kind", "in": "path", "required": True,
                             "schema": {"enum": ["accept", "correct", "reject", "add"]}}],
        requestBody=_body(item=STR, version=INT, note=STR, name=STR, value=STR, unit=STR,
                          range=STR, flag={"enum": ["", "high", "low", "normal", "unknown"]},
                          page=INT, line=STR, type=STR)))},
    "/sagas/{record_id}/review/pages/{page}": {"get": _png(
        "a page of the saga's document as PNG, the item's line highlighted", [
            RECORD, {"name": "page", "in": "path", "required": True, "schema": INT},
            _query("item", "the item whose line is highlighted (b0, r1, u0, a0)"), TYPE])},
    "/review-queue": {"get": _op(
        "sagas waiting for review, oldest first, with counts per reason", "ReviewQueue",
        "viewer", parameters=[_query("user", "only this user's sagas"),
                              _query("type", "of this saga type"),
                              _query("limit", "at most N rows (1-500, default 200)", INT)])},
    "/queues": {"get": _op("per step queues and breakers (saga top)", "TopDocument", "viewer")},
    "/dead-letters": {"get": _op("dead letters, newest first (saga dlq list)",
                                 "DeadLettersDocument", "viewer",
                                 parameters=[_query("step", "only this step"),
                                             _query("limit", "at most N", INT)])},
    "/dead-letters/replay": {"post": _op(
        "re-run dead-lettered sagas (saga dlq replay)", "ReplayDocument", "operator",
        requestBody=_body(step=STR, record_ids=arr(STR), dry_run=BOOL, limit=INT))},
    "/dead-letters/purge": {"post": _op("delete dead letters (saga dlq purge)", "PurgeDocument",
                                        "operator", requestBody=_body(step=STR))},
    "/costs": {"get": _op("LLM cost per user and step (saga costs)", "CostsDocument", "viewer",
                          parameters=COST_PARAMS)},
    "/costs/daily": {"get": _op("the same per UTC day, with each day's total", "CostsDaily",
                                "viewer", parameters=COST_PARAMS)},
    "/budgets": {"get": _op(
        "budgets, spend this UTC day and month, and sagas parked for them (saga budget show)",
        "Budgets", "viewer", parameters=[_query("user", "only this user, budgeted or not")])},
    "/budgets/{user_id}": {
        "put": _op("set a user's budget; parked sagas wake unless it is spent (saga budget "
                   "set)", "BudgetSet", "operator", parameters=[USER],
                   requestBody=_body(daily=USD, monthly=USD)),
        "delete": _op("remove a user's budget; their parked sagas wake (saga budget clear)",
                      "BudgetCleared", "operator", parameters=[USER])},
    **api_schedules.OPENAPI,
    **api_start_signals.OPENAPI,
    "/openapi.json": {"get": {"summary": "this document", "security": [],
                              "responses": {"200": {"description": "OpenAPI 3.1"}}}},
}  # fmt: skip


@functools.cache
def document() -> dict[str, Any]:
    from saga.console.review_queue import ReviewQueue

    _, components = msgspec.json.schema_components(
        (StateCounts, CostRow, ReviewQueue), ref_template=REF
    )
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "saga console API",
            "version": "1",
            "description": "The shapes of the CLI's --json: its schemas (saga/cli/schemas) "
            "bundled as components. State-changing requests made with a session cookie need "
            "the X-CSRF-Token header.",
        },
        "servers": [{"url": "/api/v1"}],
        "security": [{"bearer": []}],
        "components": {
            "schemas": {**components, **_bundled(), **OWN},
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "paths": PATHS,
    }


def _bundled() -> dict[str, Any]:
    """The CLI's strict schemas, their ``$defs`` as components (the same Struct gives the
    same definition in every schema it appears in)."""
    out: dict[str, Any] = {}
    for command in CLI.values():
        for name, definition in shapes.schema(command)["$defs"].items():
            out[name] = _rebased(definition)
    return out


def _rebased(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: (REF.format(name=v.removeprefix("#/$defs/")) if k == "$ref" else _rebased(v))
                for k, v in node.items()}  # fmt: skip
    if isinstance(node, list):
        return [_rebased(v) for v in node]
    return node
