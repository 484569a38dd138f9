"""saga export [--since WHEN] [--type T] [--user U] [-o FILE [--resume]] [--cursor C]
[--decrypt]: sagas and their whole histories as JSON Lines, for an audit or an import."""

from __future__ import annotations

import argparse
import re
import sys
import time
from datetime import UTC, datetime
from typing import Any, BinaryIO

from saga.cli.common import CliError, Exit, run

_RELATIVE = re.compile(r"(\d+)([dhm])")
_UNIT_S = {"d": 86400, "h": 3600, "m": 60}


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "export",
        help="write sagas and their histories as JSON Lines (an audit copy)",
        description=(
            "Write every saga created since --since (of every saga type, or --type, or "
            "of one --user), with its whole history and index entries, one JSON object a "
            "line, to stdout or -o FILE. Read a page at a time: memory stays flat however "
            "many sagas there are. Each line carries a cursor: --resume continues a cut "
            "export file after its last whole line; --cursor C starts after C. Values "
            "sealed under the data key stay sealed unless --decrypt (which needs the key: "
            "SAGA_DATA_KEYS or SAGA_DATA_KEY). `saga import` reads the file back."
        ),
    )
    p.add_argument("--since", metavar="WHEN", help="created at or after: 2026-01-31, an ISO "
                   "time, or an age such as 30d, 12h, 90m (default: every saga)")  # fmt: skip
    p.add_argument("--type", dest="saga_type", metavar="T", help="only this saga type")
    p.add_argument("--user", metavar="USER", help="only this user's sagas")
    p.add_argument("-o", "--output", metavar="FILE", help="write here (default: stdout)")
    p.add_argument("--resume", action="store_true", help="continue the cut export in -o FILE")
    p.add_argument("--cursor", metavar="C", help="start after this cursor (a line's 'cursor')")
    p.add_argument("--decrypt", action="store_true", help="open sealed values (needs the key)")
    p.add_argument("--format", choices=("jsonl", "parquet"), default="jsonl",
                   help="jsonl (default) or parquet (needs -o FILE and pyarrow: the "
                        "'parquet' extra)")  # fmt: skip
    p.set_defaults(func=main)


def since_ms(raw: str | None, now_s: float) -> int:
    """--since as ms since the epoch: an age (30d, 12h, 90m) before ``now_s``, or an ISO
    date or time (UTC unless it names its zone); ValueError with one sentence else."""
    if not raw:
        return 0
    age = _RELATIVE.fullmatch(raw.strip())
    if age:
        return int((now_s - int(age.group(1)) * _UNIT_S[age.group(2)]) * 1000)
    try:
        when = datetime.fromisoformat(raw.strip())
    except ValueError:
        raise ValueError(
            f"--since {raw!r} is neither a date (2026-01-31), an ISO time nor an age (30d, 12h)"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return int(when.timestamp() * 1000)


def main(args: argparse.Namespace) -> int:
    from saga.config.settings import load_settings
    from saga.state.archive import ExportCursor, Selection
    from saga.state.ids import validate_id

    if args.resume and (not args.output or args.cursor):
        raise CliError("--resume continues an -o FILE export (and takes no --cursor).", Exit.USAGE)
    if args.format == "parquet" and (not args.output or args.resume):
        raise CliError(
            "--format parquet writes a new -o FILE (resume with --cursor into another).",
            Exit.USAGE,
        )
    if args.user:
        validate_id(args.user, "user id")
    try:
        low = since_ms(args.since, time.time())
        after = ExportCursor.decode(args.cursor) if args.cursor else None
    except ValueError as exc:
        raise CliError(str(exc), Exit.USAGE) from None
    settings = load_settings()
    if args.decrypt and not (settings.data_key or settings.data_keys):
        raise CliError(
            "--decrypt needs the data key: set SAGA_DATA_KEYS or SAGA_DATA_KEY.", Exit.USAGE
        )
    if args.format == "parquet":
        from saga.lifecycle.parquet import ParquetMissingError, schema

        try:
            schema()
        except ParquetMissingError as exc:
            raise CliError(str(exc) + ".", Exit.USAGE) from None
        out: BinaryIO = sys.stdout.buffer  # unused: pyarrow writes the file
    else:
        out, after = _open(args, after)
    selection = Selection(since_ms=low, user_id=args.user or "", after=after)

    async def go() -> int:
        from saga.wiring.runtime import client_for

        async with client_for(settings) as client:
            count, last = await export_to(client, settings, args, selection, out)
        where = args.output or "stdout"
        tail = f"; to continue after it: --cursor {last}" if last else ""
        print(f"exported {count} saga(s) to {where}{tail}", file=sys.stderr)
        return Exit.OK

    try:
        return run(go)
    finally:
        if out is not sys.stdout.buffer:
            out.close()


def _open(args: argparse.Namespace, after: Any) -> tuple[BinaryIO, Any]:
    """The output, and where to start: with --resume, after the file's last whole line
    (a line cut by the interruption is cut off)."""
    from saga.state.archive import ExportCursor, resume_point

    if not args.output:
        return sys.stdout.buffer, after
    try:
        if args.resume:
            cursor, size = resume_point(args.output)
            f = open(args.output, "r+b")  # noqa: SIM115 (closed by main)
            f.truncate(size)
            f.seek(size)
            return f, ExportCursor.decode(cursor) if cursor else None
        return open(args.output, "wb"), after
    except FileNotFoundError:
        raise CliError(f"{args.output} does not exist: nothing to resume.", Exit.USAGE) from None
    except (OSError, ValueError) as exc:
        raise CliError(f"cannot write {args.output}: {exc}.", Exit.FAILED) from None


async def export_to(
    client: Any, settings: Any, args: argparse.Namespace, selection: Any, out: BinaryIO
) -> tuple[int, str]:
    """Write the selected sagas; (how many, the last line's cursor)."""
    from saga.cli.saga_types import typed_keys
    from saga.state.archive import encode_line, export_sagas
    from saga.state.types import type_names

    keys = await typed_keys(client, settings, args.saga_type)
    names = [keys.saga_type] if args.saga_type else await type_names(client, keys)
    keyring = [keys.of_type(n) for n in dict.fromkeys(names or [keys.saga_type])]
    opener = keys.sealer if args.decrypt else None
    if args.format == "parquet":
        from saga.lifecycle.parquet import write_parquet

        return await write_parquet(export_sagas(client, keyring, selection, opener), args.output)
    count, last = 0, ""
    async for doc in export_sagas(client, keyring, selection, opener):
        out.write(encode_line(doc))
        count, last = count + 1, doc.cursor
        if count % 200 == 0:
            out.flush()
    out.flush()
    return count, last
