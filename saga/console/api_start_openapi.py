"""The start API's part of the OpenAPI document (``saga.console.openapi`` merges it)."""

from __future__ import annotations

from typing import Any

REF = "#/components/schemas/{name}"
STR, INT = {"type": "string"}, {"type": "integer"}
ID = {"type": "string", "pattern": "^[A-Za-z0-9][A-Za-z0-9._:@+=-]*$", "maxLength": 128}


def _ref(name: str) -> dict[str, str]:
    return {"$ref": REF.format(name=name)}


def _json(schema: dict[str, Any]) -> dict[str, Any]:
    return {"application/json": {"schema": schema}}


START_BODY = {
    "type": "object",
    "required": ["record_id", "user_id"],
    "additionalProperties": False,
    "properties": {
        "record_id": {**ID, "description": "the saga's key: starting it again is a no-op"},
        "user_id": {**ID, "description": "whose record it is (costs, budgets, caps)"},
        "type": {**STR, "description": "a registered saga type (default: the console's own)"},
        "input": {"type": "object", "description": "the first step's input (default: the "
                  "type's own, e.g. the document pipeline resolves the record's document)"},
        "priority": {**INT, "minimum": 0, "maximum": 9, "default": 0,
                     "description": "above 0: claimed before priority-0 sagas waiting at the first "
                     "step, each held back at most SAGA_PRIORITY_AGE_BOOST"},
    },
}  # fmt: skip
RETRY_AFTER = {"Retry-After": {"description": "seconds until a request would pass",
                               "schema": INT}}  # fmt: skip


def _error(description: str, **extra: Any) -> dict[str, Any]:
    return {"description": description, "content": _json(_ref("Error")), **extra}


def _started(description: str) -> dict[str, Any]:
    location = {"Location": {"description": "the saga's URL (GET it for its state)",
                             "schema": STR}}  # fmt: skip
    return {"description": description, "content": _json(_ref("StartDocument")),
            "headers": location}  # fmt: skip


START = {
    "summary": "start a saga (saga start); idempotent by record id",
    "description": "Role: producer or operator. Rate-limited per token "
    "(SAGA_CONSOLE_START_RATE, SAGA_CONSOLE_START_BURST). The saga as a viewer sees it "
    "(no document name) unless the caller is an operator.",
    "requestBody": {"required": True, "content": _json(START_BODY)},
    "responses": {
        "201": _started("started"),
        "200": _started("the record had this saga already (same user): nothing changed"),
        "400": _error("bad input"),
        "401": _error("not signed in, or an unknown token"),
        "403": _error("needs the producer or operator role, or a CSRF check failed"),
        "409": _error("the record's saga belongs to another user"),
        "429": _error("over the token's rate", headers=RETRY_AFTER),
    },
}
TOO_MANY = {"429": _error("a producer over its token's rate", headers=RETRY_AFTER),
            "404": _error("no saga for this record")}  # fmt: skip
"""Added to ``GET /sagas/{record_id}``, which a producer may call too."""
