"""Query parameters of the list pages and their API twins, checked into typed queries.

The same names and meanings as the CLI's flags (``saga list --state --step --user
--review --since --limit --type``), plus ``cursor`` for the next page, ``before``
for the previous one, ``sort`` (``created`` | ``updated``) and ``q`` (a record id or
its start).
"""

from __future__ import annotations

from collections.abc import Mapping

from saga.console.errors import ConsoleError
from saga.state.ids import validate_id, validate_step
from saga.state.listing import Cursor, ListQuery
from saga.state.model import SagaState

MAX_PAGE = 500
ORDERS = ("created", "updated")
"""``sort``: newest created first, or by the last change of state (``updated``)."""
STATES = [*(s.value for s in SagaState), "parked"]
"""The state filter's values, as ``saga list --state``: ``parked`` is waiting without
spending attempts (a budget or an open circuit), a subset of waiting_retry."""


def since_ms(value: str | None) -> int:
    """``since``: 30m, 2h, 7d or an ISO date, as ``--since`` reads it."""
    from saga.cli.common import CliError, parse_since

    try:
        return parse_since(value or None)
    except CliError as exc:
        raise ConsoleError(str(exc).replace("--since", "since")) from None


def limit(value: str | None, default: int, most: int) -> int:
    if not value:
        return default
    if not value.isdigit() or not 1 <= int(value) <= most:
        raise ConsoleError(f"limit must be a whole number from 1 to {most}")
    return int(value)


def flag(value: str | None) -> bool:
    return (value or "").lower() in ("1", "true", "yes", "on")


def list_query(p: Mapping[str, str]) -> ListQuery:
    state = p.get("state") or None
    if state is not None and state not in STATES:
        raise ConsoleError(f"state {state!r} must be one of {', '.join(STATES)}")
    cursor, before = p.get("cursor") or None, p.get("before") or None
    if cursor and before:
        raise ConsoleError("give cursor (the next page) or before (the previous), not both")
    order = p.get("sort") or "created"
    if order not in ORDERS:
        raise ConsoleError(f"sort must be {' or '.join(ORDERS)}")
    parked = state == "parked"
    return ListQuery(
        state=SagaState(state) if state and not parked else None,
        parked=parked,
        step=validate_step(p["step"]) if p.get("step") else None,
        user=validate_id(p["user"], "user id") if p.get("user") else None,
        since_ms=since_ms(p.get("since")),
        review=flag(p.get("review")),
        limit=limit(p.get("limit"), 50, MAX_PAGE),
        after=Cursor.decode(cursor) if cursor else None,
        before=Cursor.decode(before) if before else None,
        order=order,
    )


def search(value: str | None) -> str:
    """``q``: a record id or the start of one ("" for none)."""
    from saga.state.search import check_prefix

    text = (value or "").strip()
    return check_prefix(text) if text else ""


def saga_type(value: str | None) -> str | None:
    """``type``: a saga type's name (``--type``); whether it is registered is the
    service's question."""
    from saga.state.keys import validate_type

    return validate_type(value) if value else None


def user(value: str | None) -> str | None:
    return validate_id(value, "user id") if value else None
