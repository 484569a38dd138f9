"""saga review accept <record_id> [--note TEXT] [--type T]: a person accepts a saga's
flagged results."""

from __future__ import annotations

import argparse

from saga.cli.common import Exit, print_json, run
from saga.cli.saga_types import add_type_option


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "review",
        help="accept the results of a saga flagged for review",
        description=(
            "A step flags its saga for review when its output should not be trusted "
            "unseen (the parser: values rejected by a check, low coverage, nothing "
            "found, pages without text). List them with `saga list --review`, look with "
            "`saga show <record> --output`, then either re-run (`saga retry <record> "
            "--step parser`) or accept them here: the flags are cleared and who accepted "
            "is recorded in the saga's history."
        ),
        epilog="Exit codes: 0 accepted, 1 not flagged, 2 invalid id, 3 Redis unreachable, "
        "4 no such saga.",
    )
    verbs = p.add_subparsers(dest="verb", metavar="<verb>", required=True)
    accept = verbs.add_parser("accept", help="accept the flagged results of a saga")
    accept.add_argument("record_id")
    accept.add_argument("--note", default="", help="why they are acceptable (kept in history)")
    add_type_option(accept)
    accept.add_argument("--json", action="store_true")
    accept.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from saga.settings import load_settings
    from saga.state.ids import validate_id

    validate_id(args.record_id, "record id")
    settings = load_settings()

    async def go() -> int:
        from saga.cli.cmd_cancel import actor
        from saga.client import SagaClient

        who = actor() + (f": {args.note}" if args.note else "")
        async with await SagaClient.for_type(settings, args.saga_type) as sagas:
            cleared = await sagas.accept_review(args.record_id, actor=who[:500])
        if args.json:
            from saga.cli.shapes import ReviewAccepted

            print_json(
                ReviewAccepted(record_id=args.record_id, accepted=True, flags_cleared=cleared)
            )
        else:
            print(f"saga {args.record_id}: review accepted ({cleared} flag(s) cleared)")
        return Exit.OK

    return run(go)
