"""saga migrate [--dry-run] [--batch N] [--json]: move the keyspace's schema forward to
this release's, online, in bounded batches (state/migrations.py)."""

from __future__ import annotations

import argparse
import sys

from saga.cli.common import CliError, Exit, print_json, run


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "migrate",
        help="move the keyspace's schema version forward to this release's",
        description="Run, in order, every migration the keyspace still needs to reach "
        "this release's schema version, in bounded batches while workers run. Progress "
        "is stored in Redis after every batch: a run that was killed resumes where it "
        "stopped, and a run with nothing left to do changes nothing. Refuses (exit 2) a "
        "keyspace whose schema is newer than this release's.",
    )
    p.add_argument("--dry-run", action="store_true", help="count what would change; write nothing")
    p.add_argument("--batch", type=int, default=500, metavar="N", help="items per batch (500)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from saga.config.settings import load_settings
    from saga.state.migrations import MigrateReport, Migration, migrate
    from saga.wiring.runtime import client_for, keys_of

    if not 1 <= args.batch <= 100_000:
        raise CliError(f"--batch must be between 1 and 100000, not {args.batch}.", Exit.USAGE)
    settings = load_settings()
    verb = "would change" if args.dry_run else "changed"

    def progress(m: Migration, batches: int, changed: int) -> None:
        if not args.json:  # stderr: stdout stays the summary a script reads
            print(f"{m.id}: batch {batches}, {changed} {verb}", file=sys.stderr)

    async def go() -> MigrateReport:
        async with client_for(settings, migrating=True) as client:
            return await migrate(
                client,
                keys_of(settings),
                apply=not args.dry_run,
                batch=args.batch,
                progress=progress,
            )

    report = run(go)
    if args.json:
        print_json(report)
        return Exit.OK
    for r in report.migrations:
        state = "already done" if r.already_done else f"{r.changed} {verb}"
        print(f"{r.id} (to version {r.to}): {r.summary}: {state}")
    if report.from_version == report.to_version:
        print(f"schema version {report.from_version}: nothing to migrate")
    elif args.dry_run:
        print(f"dry run: schema version {report.from_version} would become {report.to_version}")
    else:
        print(f"schema version {report.from_version} -> {report.to_version}")
    return Exit.OK
