"""saga review show|accept|correct|reject|add: a person reviews a flagged saga, value by
value (or accepts its flagged results whole: ``accept`` without an item)."""

from __future__ import annotations

import argparse
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from saga.cli.common import CliError, Exit, print_json, run
from saga.cli.saga_types import add_type_option

if TYPE_CHECKING:
    from saga.api.client import SagaClient

EPILOG = (
    "Exit codes: 0 done, 1 not flagged, complete already, or another reviewer decided "
    "first (run `saga review show` again), 2 invalid id or decision, 3 Redis unreachable, "
    "4 no such saga."
)
FIELDS = ("name", "value", "unit", "range", "flag")


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "review",
        help="review a saga flagged for review, value by value",
        description=(
            "A step flags its saga for review when its output should not be trusted "
            "unseen (the parser: values rejected by a check, low coverage, values no "
            "check vouched for). List them with `saga list --review`; `saga review show` "
            "prints each item (b<i> a value, r<i> a rejected value, u<i> an unexplained "
            "line, a<i> an added value) with the review's version. Decide every flagged "
            "item (accept, correct, reject, add): the last decision replaces the parser's "
            "output (its original is kept) and the grouper re-runs on the reviewed values. "
            "Pass --version (from show) so that a decision another reviewer made "
            "meanwhile is a conflict, never overwritten. `accept` without an item accepts "
            "the flagged results whole. Every decision is in the saga's history with who "
            "made it and the old and new value."
        ),
        epilog=EPILOG,
    )
    verbs = p.add_subparsers(dest="verb", metavar="<verb>", required=True)
    show = verbs.add_parser("show", help="the items of a saga's review", epilog=EPILOG)
    show.add_argument("record_id")
    _common(show, decide=False)
    show.set_defaults(func=main_show)

    accept = verbs.add_parser(
        "accept", help="accept one value, or (no item) the flagged results whole", epilog=EPILOG
    )
    accept.add_argument("record_id")
    accept.add_argument("item", nargs="?", help="the item (b0, r1, ...); none: the whole saga")
    _common(accept)
    accept.set_defaults(func=main_accept)

    correct = verbs.add_parser("correct", help="correct a value", epilog=EPILOG)
    correct.add_argument("record_id")
    correct.add_argument("item")
    _fields(correct)
    _common(correct)
    correct.set_defaults(func=main_decide, kind="correct")

    reject = verbs.add_parser("reject", help="reject a value or an unexplained line",
                              epilog=EPILOG)  # fmt: skip
    reject.add_argument("record_id")
    reject.add_argument("item")
    _common(reject)
    reject.set_defaults(func=main_decide, kind="reject")

    add = verbs.add_parser(
        "add", help="add a value the machine missed (from a line u<i>, or anywhere)",
        epilog=EPILOG,
    )  # fmt: skip
    add.add_argument("record_id")
    add.add_argument("item", nargs="?", default="new", help="an unexplained line u<i> (default: "
                     "new, with --page and --line)")  # fmt: skip
    _fields(add)
    add.add_argument("--page", type=int, default=0, help="the page the value is on")
    add.add_argument("--line", default="", help="the line it is written on, as printed")
    _common(add)
    add.set_defaults(func=main_decide, kind="add")


def _fields(p: argparse.ArgumentParser) -> None:
    p.add_argument("--name", default="", help="the biomarker's name")
    p.add_argument("--value", default="", help="the value as written: 5.4, <0.1")
    p.add_argument("--unit", default="")
    p.add_argument("--range", default="", help="reference range: '4.0 - 5.6', '< 200'")
    p.add_argument("--flag", default="", choices=["", "high", "low", "normal", "unknown"])


def _common(p: argparse.ArgumentParser, decide: bool = True) -> None:
    if decide:
        p.add_argument("--version", type=int, default=None,
                       help="the review's version you read (saga review show); another "
                       "reviewer's decision since then makes this one a conflict")  # fmt: skip
        p.add_argument("--note", default="", help="why (kept in history)")
    add_type_option(p)
    p.add_argument("--json", action="store_true")


def main_show(args: argparse.Namespace) -> int:
    from saga.documents import review

    async def go(sagas: SagaClient) -> int:
        view = await review.load(sagas.redis, sagas.keys, args.record_id, sagas.type_info.steps)
        if args.json:
            print_json(view)
            return Exit.OK
        from saga.cli import review_rows as rr
        from saga.cli.tables import table

        print(rr.heading(view))
        cells = [rr.cells(r) for r in rr.rows(view)]
        print(table(rr.HEADERS, cells, shrink={"reasons": 12, "name": 10},
                    drop=("canonical", "checks")))  # fmt: skip
        return Exit.OK

    return _with_client(args, go)


def main_accept(args: argparse.Namespace) -> int:
    if args.item:
        args.kind = "accept"
        return main_decide(args)
    return _accept_whole(args)


def main_decide(args: argparse.Namespace) -> int:
    from saga.cli.cmd_cancel import actor
    from saga.documents import review
    from saga.steps.review import Fix, Kind

    fix = None
    if args.kind in ("correct", "add"):
        fix = Fix(**{f: getattr(args, f) for f in FIELDS},
                  page=getattr(args, "page", 0), line=getattr(args, "line", ""))  # fmt: skip
        if fix == Fix():
            raise CliError("say what to correct: --value, --unit, --range, --flag or --name",
                           Exit.USAGE)  # fmt: skip

    async def go(sagas: SagaClient) -> int:
        try:
            got = await review.decide(
                sagas.sm, args.record_id, sagas.type_info.steps, args.item,
                Kind(args.kind), actor=actor(), version=args.version, fix=fix, note=args.note,
            )  # fmt: skip
        except ValueError as exc:
            raise CliError(f"{exc}.", Exit.USAGE) from None
        if args.json:
            print_json(got)
        else:
            done = f"; the review is complete, {got.rerun} re-runs on the reviewed values"
            print(f"saga {args.record_id}: {got.kind} {got.item} recorded (version "
                  f"{got.version}){done if got.completed else ''}")  # fmt: skip
        return Exit.OK

    return _with_client(args, go)


def _with_client(args: argparse.Namespace, go: Callable[[SagaClient], Awaitable[int]]) -> int:
    from saga.config.settings import load_settings
    from saga.state.ids import validate_id

    validate_id(args.record_id, "record id")
    settings = load_settings()

    async def main() -> int:
        from saga.api.client import SagaClient

        async with await SagaClient.for_type(settings, args.saga_type) as sagas:
            return await go(sagas)

    return run(main)


def _accept_whole(args: argparse.Namespace) -> int:
    from saga.cli.cmd_cancel import actor

    async def go(sagas: SagaClient) -> int:
        who = actor() + (f": {args.note}" if args.note else "")
        from saga.cli.review_accept import accept_and_report

        done = await accept_and_report(sagas, args.record_id, who[:500])
        if args.json:
            print_json(done)
        else:
            on = (
                f"; it leaves the review gate for step {done.moved_on_to}"
                if done.moved_on_to
                else ""
            )
            print(
                f"saga {args.record_id}: review accepted ({done.flags_cleared} flag(s) cleared){on}"
            )
        return Exit.OK

    return _with_client(args, go)
