"""saga import FILE [--json]: read a `saga export` back into an empty keyspace."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from typing import Any, BinaryIO

from saga.cli.common import CliError, Exit, print_json, run


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "import",
        help="read a `saga export` file back into an empty keyspace",
        description=(
            "Write the sagas of an export (FILE, or - for stdin) back with their histories "
            "and index entries, for an investigation or a restore drill. Only into a "
            "keyspace that holds no saga (REDIS_URL, SAGA_KEY_PREFIX); re-running the same "
            "import after an interruption writes only what is missing. Sagas that were "
            "active come back without queue entries: `saga retry` sends them on."
        ),
    )
    p.add_argument("file", help="the export (JSON Lines), or - for stdin")
    p.add_argument("--resume", action="store_true",
                   help="continue an interrupted import of this file (the keyspace holds "
                        "only what it wrote)")  # fmt: skip
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=main)


def lines(f: BinaryIO) -> Iterator[Any]:
    """Each line as an ArchivedSaga; CliError naming the first bad line."""
    import msgspec

    from saga.state.archive import decode_line

    for number, line in enumerate(f, 1):
        if not line.strip():
            continue
        try:
            yield decode_line(line)
        except msgspec.DecodeError as exc:
            raise CliError(f"line {number} is not a saga export line: {exc}.", Exit.USAGE) from None


def main(args: argparse.Namespace) -> int:
    from saga.config.settings import load_settings

    settings = load_settings()
    try:
        f: BinaryIO = sys.stdin.buffer if args.file == "-" else open(args.file, "rb")  # noqa: SIM115
    except OSError as exc:
        raise CliError(f"cannot read {args.file}: {exc.strerror}.", Exit.USAGE) from None

    async def go() -> int:
        from saga.state.archive_import import ImportReport, import_one, keyspace_in_use
        from saga.state.machine import new_op
        from saga.wiring.runtime import client_for, keys_of

        async with client_for(settings) as client:
            keys = keys_of(settings)
            found = await keyspace_in_use(client, keys)
            if found and not args.resume:
                raise CliError(
                    f"the keyspace is not empty ({found} exists): import into an empty "
                    "Redis or another SAGA_KEY_PREFIX.",
                    Exit.FAILED,
                )
            report, op = ImportReport(), new_op()
            for doc in lines(f):
                try:
                    await import_one(client, keys.of_type(doc.saga_type), doc, report, op)
                except ValueError as exc:
                    raise CliError(f"{exc}.", Exit.FAILED) from None
        if args.json:
            print_json(report)
        else:
            print(render(report))
        return Exit.OK

    try:
        return run(go)
    finally:
        f.close()


def render(report: Any) -> str:
    text = f"imported {report.imported} saga(s), {report.entries} history entries"
    if report.present:
        text += f"; {report.present} were there already (an earlier run)"
    if report.active:
        text += (
            f"\n{len(report.active)} were active when exported and wait: "
            f"`saga retry {report.active[0]}` sends one on"
        )
    return text
