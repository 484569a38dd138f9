"""saga list [--state S] [--step S] [--step-version STEP:V] [--user U] [--review] [--since T]
[--limit N] [--json]"""

from __future__ import annotations

import argparse
import sys

from saga.cli.common import CliError, Exit, fmt_ms, parse_since, print_json, run, state_text, table
from saga.cli.saga_types import add_type_option, typed_keys

MAX_LIMIT = 10_000


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    from saga.state.model import SagaState

    p = sub.add_parser(
        "list",
        help="sagas by state, step, user or age, newest first (from the indexes)",
        description=(
            "List sagas, newest first. Served from the indexes, never by scanning the "
            "keyspace: the user index with --user, else the state index with --state "
            "(ordered by when they entered the state), else the index of creation times."
        ),
    )
    p.add_argument(
        "--state",
        choices=[*(s.value for s in SagaState), "parked"],
        help="only sagas in S; parked: waiting without spending attempts (budget, circuit)",
    )
    p.add_argument("--step", help="only sagas at step S")
    p.add_argument(
        "--step-version",
        metavar="STEP:V",
        help="only sagas whose step STEP last committed with its code at version V "
        "(@app.step(version=V); 1 when none was declared)",
    )
    p.add_argument("--user", help="only sagas of user U")
    p.add_argument(
        "--review",
        action="store_true",
        help="only sagas a step flagged for a person's review (completed, needs review)",
    )
    p.add_argument("--since", help="only sagas created since T: 30m, 2h, 7d or an ISO date")
    p.add_argument("--limit", type=int, default=50, help="at most N sagas (default 50)")
    add_type_option(p)
    p.add_argument(
        "--json", action="store_true", help='one JSON document {"sagas": [...]} (docs/json.md)'
    )
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from saga.config.settings import load_settings
    from saga.state.ids import validate_id, validate_step
    from saga.state.listing import ListQuery
    from saga.state.model import SagaState

    if not 1 <= args.limit <= MAX_LIMIT:
        raise CliError(f"--limit must be between 1 and {MAX_LIMIT}.", Exit.USAGE)
    parked = args.state == "parked"
    version_of, version = step_version(args.step_version)
    query = ListQuery(
        state=SagaState(args.state) if args.state and not parked else None,
        parked=parked,
        step=validate_step(args.step) if args.step else None,
        user=validate_id(args.user, "user id") if args.user else None,
        since_ms=parse_since(args.since),
        review=args.review,
        limit=args.limit,
        version_of=version_of,
        version=version,
    )
    settings = load_settings()

    async def go() -> int:
        from saga.state.listing import list_page
        from saga.wiring.runtime import client_for

        async with client_for(settings) as client:
            keys = await typed_keys(client, settings, args.saga_type)
            page = await list_page(client, keys, query)
        rows = page.rows
        if args.json:
            print_json(document(rows, page.skipped))
            return Exit.OK
        if page.skipped:  # on stderr: the table stays what a script parses
            print(f"saga: {skipped_note(page.skipped)}", file=sys.stderr)
        if not rows:
            print("no sagas match; try without filters, or a longer --since")
        else:
            print(_table(rows))
        return Exit.OK

    return run(go)


def skipped_note(n: int) -> str:
    """``1 entry skipped: malformed id`` (the CLI's stderr and the console's list)."""
    return f"{n} {'entry' if n == 1 else 'entries'} skipped: malformed id"


def document(rows: list, skipped: int = 0) -> object:  # type: ignore[type-arg]
    """``--json``: the rows as ``shapes_saga.ListDocument`` (the console's API answers
    with it too)."""
    from saga.cli.shapes_saga import ListDocument, SagaSummary

    return ListDocument(
        sagas=[
            SagaSummary(
                record_id=r.record_id,
                user_id=r.user_id,
                state=r.state,
                step=r.step,
                step_attempts=r.attempts,
                created_ms=r.created_ms,
                updated_ms=r.updated_ms,
                total_cost=r.cost,
                error_class=r.error_class,
                error_message=r.error_message,
                needs_review=bool(r.review),
                review_reason=r.review,
                parked_reason=r.parked,
            )
            for r in rows
        ],
        skipped=skipped,
    )


SHRINK = {"error": 16}
DROP = ("cost", "attempts", "updated", "user")
"""On a narrow terminal: the error is cut, then these columns left out, in order."""


def _table(rows: list) -> str:  # type: ignore[type-arg]
    from saga.cli.timeline import error_text, money

    cells = [
        [
            r.record_id,
            r.user_id,
            state_text(r.state, bool(r.review), r.parked),
            r.step,
            str(r.attempts),
            fmt_ms(r.updated_ms),
            money(r.cost),
            error_text(r.error_class, r.error_message, None) or _review(r.review),
        ]
        for r in rows
    ]
    headers = ["record", "user", "state", "step", "attempts", "updated", "cost", "error"]
    return table(headers, cells, shrink=SHRINK, drop=DROP)


def _review(reason: str) -> str:
    """The review reason in the error column (a flagged saga has no error)."""
    return f"review: {reason}" if reason else "-"


def step_version(value: str | None) -> tuple[str, int]:
    """``--step-version STEP:V`` as ListQuery's fields; a malformed one is a usage error."""
    from saga.state.errors import InvalidIdError
    from saga.state.ids import validate_step

    if not value:
        return "", 0
    step, _, version = value.rpartition(":")
    try:
        name = validate_step(step)
    except InvalidIdError:
        name = ""
    if not name or not version.isdigit() or not 1 <= int(version) <= 1_000_000:
        raise CliError(
            f"--step-version must be STEP:V, a step name and a version from 1 "
            f"(e.g. parser:2), not {value[:60]!r}.",
            Exit.USAGE,
        )
    return name, int(version)
