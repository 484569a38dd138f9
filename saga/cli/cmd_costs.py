"""saga costs [--user U] [--since T] [--type T] [--json]: LLM cost per user and step, with
totals."""

from __future__ import annotations

import argparse
from typing import Any

from saga.cli.common import CliError, Exit, fmt_usd, parse_since, print_json, run, table
from saga.cli.saga_types import add_type_option, typed_keys

DEFAULT_DAYS = 30
MAX_DAYS = 3660


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "costs",
        help="LLM cost per user and step, from the daily totals",
        description=(
            "Sum the daily cost totals (UTC days) over every partition, per user and step: "
            "attempts that reported a cost and US dollars, with totals per user and overall."
        ),
    )
    p.add_argument("--user", help="only this user")
    p.add_argument(
        "--since",
        help=f"from the day of T: 7d, 2h or an ISO date (default: the last {DEFAULT_DAYS} days)",
    )
    add_type_option(p)
    p.add_argument("--json", action="store_true", help="one JSON document")
    p.set_defaults(func=main)


def days_since(since_ms: int, now_s: float) -> list[str]:
    """UTC days (YYYY-MM-DD) from the day of ``since_ms`` to today, oldest first."""
    import datetime as dt

    today = dt.datetime.fromtimestamp(now_s, dt.UTC).date()
    first = (
        dt.datetime.fromtimestamp(since_ms / 1000, dt.UTC).date()
        if since_ms
        else (today - dt.timedelta(days=DEFAULT_DAYS - 1))
    )
    count = (today - first).days + 1
    if count > MAX_DAYS:
        raise CliError(f"--since reaches back {count} days; the limit is {MAX_DAYS}.", Exit.USAGE)
    return [(first + dt.timedelta(days=i)).isoformat() for i in range(max(count, 1))]


def main(args: argparse.Namespace) -> int:
    import time

    from saga.config.settings import load_settings
    from saga.state.ids import validate_id

    user = validate_id(args.user, "user id") if args.user else None
    days = days_since(parse_since(args.since), time.time())
    settings = load_settings()

    async def go() -> int:
        from saga.state.queries import cost_totals
        from saga.wiring.runtime import client_for

        async with client_for(settings) as client:
            keys = await typed_keys(client, settings, args.saga_type)
            rows = await cost_totals(client, keys, days, user)
        if args.json:
            print_json(document(rows, days))
        elif not rows:
            print(f"no LLM costs recorded from {days[0]} to {days[-1]}")
        else:
            print(render(rows, days))
        return Exit.OK

    return run(go)


def document(rows: list[Any], days: list[str]) -> Any:
    from saga.cli.shapes import CostsDocument

    by_user: dict[str, float] = {}
    for r in rows:
        by_user[r.user_id] = by_user.get(r.user_id, 0.0) + r.usd
    return CostsDocument(
        from_day=days[0],
        to_day=days[-1],
        rows=rows,
        by_user={u: round(v, 9) for u, v in by_user.items()},
        total_usd=round(sum(r.usd for r in rows), 9),
        total_attempts=sum(r.attempts for r in rows),
    )


def render(rows: list[Any], days: list[str]) -> str:
    cells: list[list[str]] = []
    for i, r in enumerate(rows):
        cells.append([r.user_id, r.step, str(r.attempts), fmt_usd(r.usd)])
        last_of_user = i + 1 == len(rows) or rows[i + 1].user_id != r.user_id
        mine = [x for x in rows if x.user_id == r.user_id]
        if last_of_user and len(mine) > 1:
            cells.append(
                [
                    r.user_id,
                    "(all)",
                    str(sum(x.attempts for x in mine)),
                    fmt_usd(sum(x.usd for x in mine)),
                ]
            )
    cells.append(
        ["total", "", str(sum(r.attempts for r in rows)), fmt_usd(sum(r.usd for r in rows))]
    )
    return f"LLM costs {days[0]} .. {days[-1]} (UTC)\n\n" + table(
        ["user", "step", "attempts", "usd"], cells
    )
