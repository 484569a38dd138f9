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

from saga.adapters.breaker import BreakerStatus
from saga.cli.attempts import Attempt
from saga.cli.timeline import SagaView
from saga.state.dead_letters import DeadLetter
from saga.state.listing import SagaRow
from saga.state.model import HistoryEvent
from saga.state.queries import CostRow, StateCounts, StepStats

REF = "#/components/schemas/{name}"
STRUCTS = (SagaRow, SagaView, Attempt, HistoryEvent, StepStats, DeadLetter, CostRow,
           StateCounts, BreakerStatus)  # fmt: skip


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
NULL_S, NULL_N = {"type": ["string", "null"]}, {"type": ["number", "null"]}

THROUGHPUT = {"type": "object", "required": ["throughput"], "properties": {"throughput": NULL_N}}
"""``saga top`` adds the rate to each step's StepStats (not closed: StepStats has the rest)."""
ENVELOPES: dict[str, dict[str, Any]] = {
    "Error": obj(error=STR),
    "Me": obj(subject=STR, role={"enum": ["viewer", "operator"]}, via=STR),
    "SagaList": obj(sagas=arr(ref("SagaRow"))),
    "SagaDetail": obj(["saga", "attempts", "events"], saga=ref("SagaView"),
                      attempts=arr(ref("Attempt")), events=arr(ref("HistoryEvent")),
                      outputs={"type": "object", "description": "operators only"}),
    "Counts": obj(counts=ref("StateCounts")),
    "Queues": obj(at_ms=INT, window_s=NULL_N,
                  steps=arr({"allOf": [ref("StepStats"), THROUGHPUT]}),
                  breakers={"type": "object", "additionalProperties": ref("BreakerStatus")}),
    "DeadLetters": obj(dead_letters=arr(ref("DeadLetter"))),
    "ReplayResult": obj(dry_run=BOOL, replayed=arr(obj(record_id=STR, step=STR)),
                        skipped=arr(obj(record_id=STR, step=STR, reason=STR)),
                        errors=arr(obj(record_id=STR, step=STR, error=STR))),
    "PurgeResult": obj(purged=INT, steps=arr(STR)),
    "RetryResult": obj(record_id=STR, epoch=INT, step=STR, duplicate=BOOL),
    "CancelResult": obj(record_id=STR, previous_state=STR, state=STR),
    "AcceptResult": obj(record_id=STR, accepted=BOOL, flags_cleared=INT),
    "Costs": of({"from": STR, "to": STR, "rows": arr(ref("CostRow")),
                 "by_user": {"type": "object", "additionalProperties": NUM},
                 "total_usd": NUM, "total_attempts": INT}),
    "CostsDaily": of({"from": STR, "to": STR,
                      "days": arr(obj(day=STR, usd=NUM, rows=arr(ref("CostRow"))))}),
}  # fmt: skip


def _query(name: str, about: str, schema: dict[str, Any] = STR) -> dict[str, Any]:
    return {"name": name, "in": "query", "required": False, "description": about,
            "schema": schema}  # fmt: skip


RECORD = {"name": "record_id", "in": "path", "required": True, "schema": STR}
LIST_PARAMS = [
    _query("state", "only sagas in this state"), _query("step", "only sagas at this step"),
    _query("user", "only this user's sagas"), _query("review", "only sagas flagged for review"),
    _query("since", "created since: 30m, 2h, 7d or an ISO date"),
    _query("limit", "at most this many (1-500, default 50)", INT),
    _query("cursor", "where the previous page ended (from its Link header)"),
]  # fmt: skip


COST_PARAMS = [
    _query("user", "only this user"),
    _query("since", "from the day of: 7d or an ISO date (default 30 days)"),
]
NEXT = {"Link": {"description": 'the next page: <URL>; rel="next" (absent on the last)',
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


def _json(schema: dict[str, Any]) -> dict[str, Any]:
    return {"application/json": {"schema": schema}}


def _body(**props: Any) -> dict[str, Any]:
    return {"required": False, "content": _json(obj([], **props))}


PATHS: dict[str, dict[str, Any]] = {
    "/me": {"get": _op("who is signed in", "Me", "viewer")},
    "/sagas": {"get": _op("sagas from the indexes, newest first (saga list)", "SagaList",
                          "viewer", parameters=LIST_PARAMS, headers=NEXT)},
    "/counts": {"get": _op("sagas per state index", "Counts", "viewer")},
    "/sagas/{record_id}": {"get": _op("a saga, its attempts and events (saga show)",
                                      "SagaDetail", "viewer", parameters=[RECORD])},
    "/sagas/{record_id}/retry": {"post": _op("re-run from a step (saga retry)", "RetryResult",
                                             "operator", parameters=[RECORD],
                                             requestBody=_body(step=STR, force=BOOL))},
    "/sagas/{record_id}/cancel": {"post": _op("cancel (saga cancel)", "CancelResult",
                                              "operator", parameters=[RECORD])},
    "/sagas/{record_id}/review/accept": {"post": _op(
        "accept flagged results (saga review accept)", "AcceptResult", "operator",
        parameters=[RECORD], requestBody=_body(note=STR))},
    "/queues": {"get": _op("per step queues and breakers (saga top)", "Queues", "viewer")},
    "/dead-letters": {"get": _op("dead letters, newest first (saga dlq list)", "DeadLetters",
                                 "viewer", parameters=[_query("step", "only this step"),
                                                       _query("limit", "at most N", INT)])},
    "/dead-letters/replay": {"post": _op(
        "re-run dead-lettered sagas (saga dlq replay)", "ReplayResult", "operator",
        requestBody=_body(step=STR, record_ids=arr(STR), dry_run=BOOL, limit=INT))},
    "/dead-letters/purge": {"post": _op("delete dead letters (saga dlq purge)", "PurgeResult",
                                        "operator", requestBody=_body(step=STR))},
    "/costs": {"get": _op("LLM cost per user and step (saga costs)", "Costs", "viewer",
                          parameters=COST_PARAMS)},
    "/costs/daily": {"get": _op("the same per UTC day, with each day's total", "CostsDaily",
                                "viewer", parameters=COST_PARAMS)},
    "/openapi.json": {"get": {"summary": "this document", "security": [],
                              "responses": {"200": {"description": "OpenAPI 3.1"}}}},
}  # fmt: skip


@functools.cache
def document() -> dict[str, Any]:
    _, components = msgspec.json.schema_components(STRUCTS, ref_template=REF)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "saga console API",
            "version": "1",
            "description": "The shapes of the CLI's --json. State-changing requests made "
            "with a session cookie need the X-CSRF-Token header.",
        },
        "servers": [{"url": "/api/v1"}],
        "security": [{"bearer": []}],
        "components": {
            "schemas": {**components, **ENVELOPES},
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "paths": PATHS,
    }
