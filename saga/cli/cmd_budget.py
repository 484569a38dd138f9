"""saga budget set <user> --daily USD [--monthly USD] | show [<user>] | clear <user>"""

from __future__ import annotations

import argparse
import math
from typing import Any

from saga.cli.common import CliError, Exit, fmt_resume, fmt_usd, print_json, run, table


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "budget",
        help="per-user LLM budgets: set, show spend against them, clear",
        description=(
            "A user whose LLM spend reached their budget (per UTC day or month) has every "
            "step that would call a model parked, with reason `budget`: no call is made and "
            "no attempt spent. Parked steps run again by themselves when the period rolls "
            "over, at once when the budget is raised or cleared, or with `saga retry`."
        ),
    )
    verbs = p.add_subparsers(dest="verb", metavar="<verb>", required=True)
    s = verbs.add_parser("set", help="set a user's daily and/or monthly budget (USD)")
    s.add_argument("user", help="the user id")
    s.add_argument("--daily", type=_usd, metavar="USD", help="limit per UTC day")
    s.add_argument("--monthly", type=_usd, metavar="USD", help="limit per UTC month")
    s.add_argument("--json", action="store_true", help="the user's status (budget-show shape)")
    s.set_defaults(func=main_set)
    sh = verbs.add_parser("show", help="budgets and spend so far this UTC day and month")
    sh.add_argument("user", nargs="?", help="only this user (shown even without a budget)")
    sh.add_argument("--json", action="store_true", help='one JSON document {"budgets": [...]}')
    sh.set_defaults(func=main_show)
    c = verbs.add_parser("clear", help="remove a user's budget (their parked steps run again)")
    c.add_argument("user", help="the user id")
    c.add_argument("--json", action="store_true")
    c.set_defaults(func=main_clear)


def _usd(raw: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{raw!r} is not an amount in USD") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"{raw!r} must be a positive amount in USD")
    return value


def _user(raw: str) -> str:
    from saga.state.ids import validate_id

    return validate_id(raw, "user id")


def main_set(args: argparse.Namespace) -> int:
    if args.daily is None and args.monthly is None:
        raise CliError("give --daily USD, --monthly USD or both.", Exit.USAGE)
    user = _user(args.user)

    async def go(client: Any, sm: Any) -> int:
        from saga.state import budgets

        status, woken = await budgets.set_and_wake(sm, user, budgets.Budget(
            daily=args.daily, monthly=args.monthly))  # fmt: skip
        if args.json:
            print_json(document([status]))
        else:
            print(f"budget of {user}: {_limits(status)}" + _woken(woken))
        return Exit.OK

    return _with_client(go)


def main_clear(args: argparse.Namespace) -> int:
    user = _user(args.user)

    async def go(client: Any, sm: Any) -> int:
        from saga.cli.shapes import BudgetCleared
        from saga.state import budgets

        had, woken = await budgets.clear_and_wake(sm, user)
        if args.json:
            print_json(BudgetCleared(user_id=user, cleared=had, woken=woken))
        else:
            print(f"{'cleared the budget of' if had else 'no budget was set for'} {user}"
                  + _woken(woken))  # fmt: skip
        return Exit.OK

    return _with_client(go)


def main_show(args: argparse.Namespace) -> int:
    user = _user(args.user) if args.user else None

    async def go(client: Any, sm: Any) -> int:
        from saga.state import budgets

        rows = await budgets.statuses(client, sm.keys, user)
        if args.json:
            print_json(document(rows))
        elif not rows:
            print("no budgets set; `saga budget set <user> --daily USD` sets one")
        else:
            print(render(rows))
        return Exit.OK

    return _with_client(go)


def _with_client(go: Any) -> int:
    from saga.config.settings import load_settings

    settings = load_settings()

    async def main() -> int:
        from saga.state.machine import StateMachine
        from saga.wiring.runtime import client_for, keys_of

        async with client_for(settings) as client:
            return int(await go(client, StateMachine(client, keys_of(settings), settings.limits)))

    return run(main)


def document(rows: list[Any]) -> Any:
    from saga.cli.shapes import BudgetsDocument

    return BudgetsDocument(budgets=rows)


def _money(v: float | None) -> str:
    return "-" if v is None else f"${fmt_usd(v)}"


def _limits(s: Any) -> str:
    return f"daily {_money(s.daily_usd)}, monthly {_money(s.monthly_usd)}"


def _woken(n: int) -> str:
    return f"; {n} parked step{'s' if n != 1 else ''} woken" if n else ""


def _left(r: Any) -> str:
    """The smaller of what is left today and this month, after spend and holds."""
    left = [lim - spent - r.reserved_usd
            for lim, spent in ((r.daily_usd, r.spent_today_usd), (r.monthly_usd, r.spent_month_usd))
            if lim is not None]  # fmt: skip
    return _money(max(0.0, min(left))) if left else "-"


def render(rows: list[Any]) -> str:
    head = ["user", "daily", "spent today", "monthly", "spent this month", "reserved", "left",
            "parked until"]  # fmt: skip
    cells = [
        [r.user_id, _money(r.daily_usd), _money(r.spent_today_usd), _money(r.monthly_usd),
         _money(r.spent_month_usd), _money(r.reserved_usd), _left(r),
         f"{fmt_resume(r.resumes_at_ms)} ({r.exceeded})" if r.exceeded else "-"]
        for r in rows
    ]  # fmt: skip
    return table(head, cells)
