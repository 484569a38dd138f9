"""saga dlq list|show|replay|purge: the dead letters of every step (or of --step)."""

from __future__ import annotations

import argparse
from typing import Any

from saga.cli.common import CliError, Exit, fmt_ms, print_json, run, table
from saga.cli.saga_types import add_type_option, pipeline_of, typed_keys

USAGE = "saga dlq list|show|replay|purge; see `saga dlq <verb> --help`."
LIST_SHRINK = {"message": 16, "error": 14}
LIST_DROP = ("attempt", "time", "user", "step")
"""On a narrow terminal: the message is cut, then these columns left out, in order."""


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "dlq",
        help="list, show, replay or purge dead letters",
        description="Sagas that failed for good leave a dead letter at the step they failed.",
    )
    verbs = p.add_subparsers(dest="verb", metavar="<verb>")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--step", help="only this step (default: every registered step)")
    common.add_argument("--json", action="store_true", help="one JSON document")
    add_type_option(common)
    v = verbs.add_parser("list", parents=[common], help="dead letters, newest first")
    v.add_argument("--limit", type=int, default=50, help="at most N (default 50)")
    v = verbs.add_parser("show", help="the dead letter of one record")
    v.add_argument("record_id")
    v.add_argument("--json", action="store_true", help="one JSON document")
    add_type_option(v)
    v = verbs.add_parser(
        "replay", parents=[common], help="re-run dead-lettered sagas from the step they failed at"
    )
    v.add_argument("--limit", type=int, default=100, help="at most N, oldest first (default 100)")
    v.add_argument(
        "--dry-run", action="store_true", help="list what would be replayed (the default)"
    )
    v.add_argument("--yes", action="store_true", help="confirm: replay them (else a dry run)")
    v = verbs.add_parser(
        "purge", parents=[common], help="delete dead letters (the sagas stay failed); needs --yes"
    )
    v.add_argument("--yes", action="store_true", help="confirm: the entries are deleted for good")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from saga.config.settings import load_settings

    if not args.verb:
        raise CliError(f"give a verb: {USAGE}", Exit.USAGE)
    if args.verb == "purge" and not args.yes:
        raise CliError(
            "purge deletes dead letters for good (the sagas stay failed); "
            "run it again with --yes to confirm.",
            Exit.USAGE,
        )
    if args.verb == "replay":  # a bulk action runs only when confirmed, as purge does
        args.dry_run = args.dry_run or not args.yes
    if getattr(args, "limit", 1) < 1:
        raise CliError("--limit must be at least 1.", Exit.USAGE)
    if args.verb == "show":
        from saga.state.ids import validate_id

        validate_id(args.record_id, "record id")
    settings = load_settings()

    async def go() -> int:
        from saga.wiring.runtime import client_for

        async with client_for(settings) as client:
            keys = await typed_keys(client, settings, args.saga_type)
            if args.verb == "show":
                return await _show(client, keys, args)
            steps = await _steps(client, keys, args.step)
            if args.verb == "list":
                return await _list(client, keys, steps, args)
            if args.verb == "replay":
                return await _replay(client, keys, steps, args, settings)
            return await _purge(client, keys, steps, args)

    return run(go)


async def _steps(client: Any, keys: Any, step: str | None) -> list[str]:
    from saga.state.ids import validate_work
    from saga.state.queries import registered_steps

    known = await registered_steps(client, keys, undo=True)  # an undo's letters too
    if step is None:
        return known
    if validate_work(step) not in known:
        raise CliError(
            f"unknown step {step!r}; the registered steps are {', '.join(known) or 'none yet'}.",
            Exit.USAGE,
        )
    return [step]


async def _list(client: Any, keys: Any, steps: list[str], args: argparse.Namespace) -> int:
    from saga.cli.shapes import DeadLettersDocument
    from saga.state.dead_letters import dead_letters

    found = await dead_letters(client, keys, steps, args.limit)
    if args.json:
        print_json(DeadLettersDocument(dead_letters=found))
    elif not found:
        print("no dead letters")
    else:
        rows = [
            [d.record_id, d.user_id, _versioned(d.step, d.step_version), str(d.attempt),
             d.error_class, d.error_message, fmt_ms(d.at_ms)]
            for d in found
        ]  # fmt: skip
        headers = ["record", "user", "step", "attempt", "error", "message", "time"]
        print(table(headers, rows, shrink=LIST_SHRINK, drop=LIST_DROP))
    return Exit.OK


def _versioned(step: str, version: int) -> str:
    """The step, with the version of its code when one was declared (as `saga show`)."""
    return step if version == 1 else f"{step} v{version}"


async def _show(client: Any, keys: Any, args: argparse.Namespace) -> int:
    from saga.cli.shapes import DeadLettersDocument
    from saga.state.dead_letters import dead_letter_of

    found = await dead_letter_of(client, keys, args.record_id)
    if not found:
        raise CliError(
            f"record {args.record_id!r} has no dead letter; "
            f"`saga show {args.record_id}` tells where it is."
        )
    if args.json:
        print_json(DeadLettersDocument(dead_letters=found))
        return Exit.OK
    from saga.cli.tables import terminal_width, wrap

    columns = terminal_width()  # the message wraps under its label, never past the width
    for d in found:
        fields = [("record", d.record_id), ("user", d.user_id), ("step", d.step),
                  *([("version", str(d.step_version))] if d.step_version != 1 else []),
                  ("attempt", str(d.attempt)), ("epoch", str(d.epoch)),
                  ("time", fmt_ms(d.at_ms)), ("error", d.error_class),
                  ("message", d.error_message), ("entry", d.id)]  # fmt: skip
        print("\n".join(line for k, v in fields for line in wrap(k, v or "-", columns)))
    return Exit.OK


async def _replay(
    client: Any, keys: Any, steps: list[str], args: argparse.Namespace, settings: Any
) -> int:
    """Re-run each live dead letter's saga from its step; stale letters are skipped."""
    from saga.state.dead_letters import dead_letters
    from saga.state.errors import StateError

    letters = await dead_letters(client, keys, steps, args.limit, oldest_first=True)
    live, skipped = await _split_stale(client, keys, letters)
    done: list[dict[str, str]] = []
    errors: list[dict[str, str]] = []
    if not args.dry_run and live:
        # The pipeline's order says which step's output feeds the step: imported only here.
        from saga.api.client import SagaClient

        sagas = SagaClient(client, keys, await pipeline_of(client, settings, keys), settings)
        for d in live:
            try:
                if d.step.startswith("undo:"):  # a failed compensation: the undos left
                    await sagas.compensate(d.record_id, actor=_actor())
                else:
                    await sagas.retry(d.record_id, step=d.step, actor=_actor())
                done.append({"record_id": d.record_id, "step": d.step})
            except (StateError, KeyError) as exc:
                errors.append({"record_id": d.record_id, "step": d.step, "error": str(exc)})
    if args.dry_run:
        done = [{"record_id": d.record_id, "step": d.step} for d in live]
    _print_replay(args, done, skipped, errors)
    return Exit.FAILED if errors else Exit.OK


async def _split_stale(client: Any, keys: Any, letters: list[Any]) -> tuple[list[Any], list[Any]]:
    """A letter is live while its saga is failed and still names it; others are stale."""
    from saga.state.dead_letters import split_live

    live, stale = await split_live(client, keys, letters)
    return live, [{"record_id": d.record_id, "step": d.step, "reason": "stale"} for d in stale]


def _print_replay(args: argparse.Namespace, done: list, skipped: list, errors: list) -> None:  # type: ignore[type-arg]
    import sys

    import msgspec

    if args.json:
        from saga.cli.shapes import ReplayDocument

        print_json(
            msgspec.convert(
                {"dry_run": args.dry_run, "replayed": done, "skipped": skipped, "errors": errors},
                ReplayDocument,
            )
        )
        return
    verb = "would replay" if args.dry_run else "replayed"
    print(f"{verb} {len(done)} saga(s)" + (":" if done else ""))
    for r in done:
        print(f"  {r['record_id']}  from {r['step']}")
    if args.dry_run and done and not args.yes:
        print("nothing was replayed: run it again with --yes to replay them")
    if skipped:
        print(f"skipped {len(skipped)} stale dead letter(s) (the saga moved on or is gone)")
    for e in errors:
        print(f"saga: {e['record_id']} was not replayed: {e['error']}", file=sys.stderr)


async def _purge(client: Any, keys: Any, steps: list[str], args: argparse.Namespace) -> int:
    from saga.state.dead_letters import purge_dead_letters

    count = await purge_dead_letters(client, keys, steps)
    if args.json:
        from saga.cli.shapes import PurgeDocument

        print_json(PurgeDocument(purged=count, steps=steps))
    else:
        print(f"purged {count} dead letter(s) of {', '.join(steps) or 'no steps'}")
    return Exit.OK


def _actor() -> str:
    import getpass
    import socket

    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "unknown"
    return f"cli dlq replay {user}@{socket.gethostname()}"
