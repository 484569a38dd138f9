"""saga purge <record> | --user <user> [--yes] [--type T] [--json]: erase every trace."""

from __future__ import annotations

import argparse
from typing import Any

from saga.cli.common import CliError, Exit, print_json, run
from saga.cli.saga_types import add_type_option


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "purge",
        help="erase a record, or every record of a user (a dry run without --yes)",
        description=(
            "Erase every trace of a record: its saga, history, pages, outputs, dead "
            "letter, quarantined entries, ready entries, index entries, cached LLM "
            "answers and the cached embeddings it used, its users' slots and deferrals. "
            "With --user, every record of the user in every saga type, then the user's "
            "budget and cached billing key; the user's cost ledger amounts are kept "
            "under the name '~erased'. A saga still active (pending, running, waiting for "
            "a retry, compensating) is refused: cancel it first (`saga cancel`). Without "
            "--yes nothing is deleted: it says what would be."
        ),
    )
    p.add_argument("record_id", nargs="?", help="the record to erase")
    p.add_argument("--user", metavar="USER", help="erase every record of this user instead")
    p.add_argument("--yes", action="store_true", help="delete (default: a dry run)")
    add_type_option(p, "the record's: documents, or SAGA_PIPELINE's type; --user: every type")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from saga.config.settings import load_settings
    from saga.state.ids import validate_id

    if bool(args.record_id) == bool(args.user):
        raise CliError("name a record, or a user with --user (not both).", Exit.USAGE)
    if args.record_id:
        validate_id(args.record_id, "record id")
    else:
        validate_id(args.user, "user id")
    settings = load_settings()

    async def go() -> int:
        from saga.wiring.runtime import client_for

        async with client_for(settings) as client:
            doc = await (
                _user(client, settings, args) if args.user else _record(client, settings, args)
            )
        if args.json:
            print_json(doc)
        else:
            print(render(doc))
        refused = [r for r in doc.records if r.refused]
        if refused and args.yes:
            raise CliError(
                f"{len(refused)} record(s) not purged: {refused[0].record_id} {refused[0].refused}"
            )
        return Exit.OK

    return run(go)


async def _record(client: Any, settings: Any, args: argparse.Namespace) -> Any:
    from saga.cli.saga_types import pipeline_of, typed_keys
    from saga.cli.shapes_data import PurgeReport
    from saga.state.purge import Purger, work_of

    keys = await typed_keys(client, settings, args.saga_type)
    pipeline = await pipeline_of(client, settings, keys)
    steps = await work_of(client, keys, _names(pipeline))
    done = await Purger(client, keys, steps).record(args.record_id, apply=args.yes)
    return PurgeReport(applied=args.yes, user_id="", records=[done])


async def _user(client: Any, settings: Any, args: argparse.Namespace) -> Any:
    from saga.cli.saga_types import typed_keys
    from saga.cli.shapes_data import PurgeReport
    from saga.state.purge import Purger, purge_user, work_of
    from saga.state.types import type_names

    keys = await typed_keys(client, settings, args.saga_type)
    names = [keys.saga_type] if args.saga_type else await type_names(client, keys)
    purgers = []
    for name in dict.fromkeys([keys.saga_type, *names]):
        typed = keys.of_type(name)
        purgers.append(Purger(client, typed, await work_of(client, typed)))
    done = await purge_user(client, purgers, args.user, apply=args.yes)
    return PurgeReport(
        applied=args.yes,
        user_id=args.user,
        records=done.records,
        ledger_fields=done.ledger_fields,
        user_keys=done.user_keys,
    )


def _names(pipeline: Any) -> tuple[str, ...]:
    names = getattr(pipeline, "names", None)
    return tuple(names) if names is not None else tuple(pipeline.steps)


def render(doc: Any) -> str:
    from saga.cli.tables import table

    verb = "deleted" if doc.applied else "would delete"
    rows = [(r.record_id, r.state or "(gone)", r.keys, r.entries, r.members, r.embeddings,
             r.refused or verb) for r in doc.records]  # fmt: skip
    head = ["RECORD", "STATE", "KEYS", "ENTRIES", "SLOTS", "EMBEDDINGS", "OUTCOME"]
    lines = [table(head, rows, shrink={"OUTCOME": 12})] if rows else ["no record found"]
    if doc.user_id:
        lines.append(
            f"user {doc.user_id}: {doc.ledger_fields} cost ledger field(s) moved to '~erased', "
            f"{doc.user_keys} budget/billing key(s) {verb}"
        )
    if not doc.applied:
        lines.append("dry run: nothing was deleted; run again with --yes to delete")
    return "\n".join(lines)
