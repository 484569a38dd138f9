"""saga partitions show | migrate --to N [--force]: the keyspace's stored partition count."""

from __future__ import annotations

import argparse

from saga.cli.common import CliError, Exit, print_json, run


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "partitions",
        help="show the stored partition count, or move records to another count",
        description=(
            "A record lives in partition crc32(record_id) %% count. The count is stored "
            "in the keyspace (by `saga init` or the first process); a process whose "
            "SAGA_PARTITIONS differs refuses to run. `migrate --to N` moves every "
            "terminal saga (hash, history, pages, cached answers, index entries, dead "
            "letter) to its partition under N, then stores N. It needs a drain: stop "
            "starting sagas and let the workers finish them; it refuses while any saga "
            "is pending, running or waiting for a retry (--force moves the others and "
            "leaves those). Processes started while it runs refuse to run. Stopped "
            "midway, run it again: it resumes."
        ),
    )
    verbs = p.add_subparsers(dest="verb", metavar="<verb>", required=True)
    show = verbs.add_parser("show", help="the stored count and any migration under way")
    show.add_argument("--json", action="store_true")
    show.set_defaults(func=main_show)
    mig = verbs.add_parser("migrate", help="move records to N partitions (needs a drain)")
    mig.add_argument("--to", type=int, required=True, metavar="N", help="partitions, 1..1024")
    force = "move terminal sagas while others are active (those stay; the count waits for them)"
    mig.add_argument("--force", action="store_true", help=force)
    mig.add_argument("--json", action="store_true")
    mig.set_defaults(func=main_migrate)


def main_show(args: argparse.Namespace) -> int:
    from saga.config.settings import load_settings
    from saga.state.partitions import stored_count
    from saga.wiring.runtime import keys_of, open_client

    settings = load_settings()
    keys = keys_of(settings)

    async def go() -> int:
        client = open_client(settings)
        try:
            stored = await stored_count(client, keys)
        finally:
            await client.aclose()
        if args.json:
            from saga.cli.shapes import PartitionsDocument

            print_json(PartitionsDocument(prefix=keys.prefix, configured=settings.partitions,
                stored=stored.count if stored else None,
                migrating_to=stored.migrating_to if stored else 0))  # fmt: skip
        elif stored is None:
            print(f"no partition count stored for {keys.prefix!r} yet (run `saga init`)")
        else:
            moving = f", migrating to {stored.migrating_to}" if stored.migrating_to else ""
            print(f"{keys.prefix!r}: {stored.count} partition(s){moving}; "
                  f"SAGA_PARTITIONS={settings.partitions}")  # fmt: skip
        return Exit.OK

    return run(go)


def main_migrate(args: argparse.Namespace) -> int:
    from saga.config.settings import load_settings
    from saga.state.repartition import migrate
    from saga.wiring.runtime import document_pipeline, keys_of, open_client

    if not 1 <= args.to <= 1024:
        raise CliError("--to must be between 1 and 1024.", Exit.USAGE)
    settings = load_settings()
    keys = keys_of(settings)
    steps = list(document_pipeline(settings).names)

    async def go() -> int:
        client = open_client(settings)
        try:
            report = await migrate(client, keys, args.to, steps, force=args.force)
        finally:
            await client.aclose()
        if args.json:
            print_json(report)
        else:
            print(f"{report.moved} moved, {report.stayed} already in place, "
                  f"{report.active_left} active left, {report.changed} changed meanwhile; "
                  f"{report.from_count} -> {report.to_count} partitions")  # fmt: skip
        if not report.done:
            raise CliError(
                f"the stored count is still {report.from_count}: some sagas were left in "
                f"place; run `saga partitions migrate --to {args.to}` again once they finish"
            )
        if not args.json:
            print(f"done: set SAGA_PARTITIONS={args.to} everywhere, then start the workers")
        return Exit.OK

    return run(go)
