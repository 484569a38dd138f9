"""saga start <record_id> <user_id> [--document D] [--wait [--timeout S]]"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

from saga.cli.common import CliError, Exit, print_json, run, state_text, table
from saga.cli.saga_types import add_type_option

NO_WORKER_AFTER_S = 3.0
"""How long ``--wait`` sees a saga pending with nobody reading its step before saying so."""
POLL_S = 0.25


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "start",
        help="start the saga of a record (idempotent)",
        description="Start the saga of a record. Starting it again returns the existing saga.",
        epilog="Exit codes: 0 started (with --wait: completed), 1 failed or cancelled "
        "(--wait), or owned by another user, 2 bad input, 3 Redis unreachable, "
        "5 --timeout ran out (the saga goes on), 6 completed but needs review (--wait).",
    )
    p.add_argument("record_id")
    p.add_argument("user_id")
    p.add_argument(
        "--document",
        default="",
        help="path or URL of the document; a path is made absolute here and must exist "
        "(default: resolved from SAGA_DOCUMENT_SOURCE by the router)",
    )
    p.add_argument(
        "--input", help="the first step's input as a JSON object (instead of --document)"
    )
    add_type_option(p)
    p.add_argument(
        "--priority",
        type=int,
        default=0,
        choices=range(10),
        metavar="0-9",
        help="above 0: claimed before priority-0 sagas waiting at the first step, each held "
        "back at most SAGA_PRIORITY_AGE_BOOST (default 0)",
    )
    p.add_argument(
        "--wait",
        action="store_true",
        help="wait for a terminal state; says so once if no worker reads the saga's step",
    )
    p.add_argument(
        "--timeout", type=float, default=0, help="with --wait: give up after S seconds (exit 5)"
    )
    p.add_argument("--json", action="store_true", help='print {"created", "saga"}')
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from saga.config.settings import load_settings
    from saga.telemetry.tracing import configure_tracing

    if args.timeout < 0:
        raise CliError("--timeout must not be negative.", Exit.USAGE)
    settings = load_settings()
    document = local_document(args.document)
    stop_tracing = configure_tracing(settings.otel_endpoint, "saga-cli", announce=False)

    async def go() -> int:
        from saga.api.client import SagaClient

        async with await SagaClient.for_type(settings, args.saga_type) as sagas:
            first = args.input.encode() if args.input else None
            if sagas.keys.saga_type == "documents":
                _readable(document or _document_of(first))
            try:
                res = await sagas.start(
                    args.record_id, args.user_id, document=document, input=first,
                    priority=args.priority,
                )  # fmt: skip
            except ValueError as exc:  # --input does not fit the first step
                raise CliError(f"{exc}.", Exit.USAGE) from None
            if not args.json:
                _print_started(args, res)
            if not args.wait:
                if args.json:
                    _print_document(res.created, await sagas.get(args.record_id))
                return Exit.OK
            return await _wait(sagas, args, res.created)

    try:
        return run(go)
    finally:
        stop_tracing()  # flushes the saga's root span


SCHEMES = ("file", "http", "https")
"""What the document pipeline's router fetches (saga.adapters.documents)."""


def _document_of(first: bytes | None) -> str:
    import msgspec

    try:
        found = msgspec.json.decode(first or b"{}", type=dict[str, Any]).get("document")
    except msgspec.DecodeError:
        return ""  # the client says what is wrong with the input
    return found if isinstance(found, str) else ""


def _readable(ref: str) -> None:
    """A document the router cannot fetch can only dead-letter: refused at start."""
    from urllib.parse import urlsplit

    scheme = urlsplit(ref).scheme.lower() if "://" in ref else ""
    if scheme and scheme not in SCHEMES:
        raise CliError(
            f"the document's scheme {scheme[:20]!r} is not one the router fetches; "
            "use a path, file:// or http(s)://",
            Exit.USAGE,
        )


def local_document(ref: str) -> str:
    """A path is the caller's: made absolute against this directory (workers run
    elsewhere) and refused now if there is no file. URLs (``file://`` too) pass as given."""
    if not ref or "://" in ref:
        return ref
    path = Path(os.path.abspath(Path(ref).expanduser()))
    if not path.is_file():
        what = "is a directory" if path.is_dir() else "does not exist"
        raise CliError(f"--document {path} {what}; pass a document file or a URL", Exit.USAGE)
    return str(path)


def _print_document(created: bool, saga: Any) -> None:
    from saga.cli.shapes_saga import StartDocument
    from saga.cli.timeline import saga_view

    print_json(StartDocument(created=created, saga=saga_view(saga)))


def _print_started(args: argparse.Namespace, res: Any) -> None:
    verb = "started" if res.created else "already exists"
    print(f"saga {args.record_id} {verb}")
    print(
        table(
            ["record", "user", "state", "step", "epoch"],
            [[args.record_id, args.user_id, state_text(res.state), res.step, res.epoch]],
        )
    )


async def _wait(sagas: Any, args: argparse.Namespace, created: bool) -> int:
    """Poll until the saga ends (exit 0 completed, 1 otherwise) or --timeout (exit 5)."""
    import anyio

    from saga.state.model import SagaState

    deadline = time.monotonic() + args.timeout if args.timeout else None
    watch = _NoWorkerWatch(sagas)
    progress = _Progress(quiet=args.json)
    while True:
        saga = await sagas.get(args.record_id)
        state = state_text(saga.state.value, saga.needs_review, saga.parked_reason)
        progress.show(f"{state} at {saga.step} (attempt {saga.attempts.get(saga.step, 0)})")
        if saga.state.terminal:
            progress.end()
            if args.json:
                _print_document(created, saga)
            elif saga.state != SagaState.COMPLETED and saga.error_class:
                print(f"  {saga.error_class}: {saga.error_message}")
            elif saga.needs_review and saga.state == SagaState.COMPLETED:
                for step, reason in saga.review.items():
                    print(f"  review {step}: {reason}")
            if saga.state != SagaState.COMPLETED:
                return Exit.FAILED
            return Exit.NEEDS_REVIEW if saga.needs_review else Exit.OK
        await watch.check(saga)
        if deadline is not None and time.monotonic() > deadline:
            progress.end()
            if args.json:
                _print_document(created, saga)
            raise CliError(
                f"saga {args.record_id} is still {saga.state.value} at {saga.step} after "
                f"{args.timeout:g}s; follow it with `saga show {args.record_id} --follow`",
                Exit.TIMEOUT,
            )
        await anyio.sleep(POLL_S)


class _Progress:
    """The saga's state as it changes: one line redrawn on a TTY, a line each elsewhere."""

    def __init__(self, *, quiet: bool) -> None:
        self.quiet, self.last, self.redraw = quiet, "", sys.stdout.isatty()

    def show(self, line: str) -> None:
        if self.quiet or line == self.last:
            return
        self.last = line
        if self.redraw:
            print("\r\033[K  " + line, end="", flush=True)
        else:
            print("  " + line, flush=True)

    def end(self) -> None:
        if self.redraw and self.last and not self.quiet:
            print()


class _NoWorkerWatch:
    """Says once, on stderr, when a pending saga's step has had no live worker for
    NO_WORKER_AFTER_S: the wait goes on (a worker may be started meanwhile). A worker is
    its presence (it leaves at once on a clean stop, within PRESENCE_TTL_S when killed),
    not its consumer in the group, which looks active for a minute after it stopped."""

    def __init__(self, sagas: Any) -> None:
        self.sagas, self.since, self.said = sagas, time.monotonic(), False

    async def check(self, saga: Any) -> None:
        from saga.state.model import SagaState
        from saga.state.presence import live_workers

        if self.said or saga.state != SagaState.PENDING:
            self.since = time.monotonic()
            return
        if time.monotonic() - self.since < NO_WORKER_AFTER_S:
            return
        keys = self.sagas.keys
        workers = await live_workers(self.sagas.redis, keys)
        if any(w.saga_type == keys.saga_type and saga.step in w.steps for w in workers):
            self.since = time.monotonic()
            return
        self.said = True
        app = "" if keys.saga_type == "documents" else f"<module:app of {keys.saga_type}> "
        print(
            f"saga: no worker is reading the {saga.step} queue; start one with "
            f"`saga worker {app}{saga.step}` or `saga up` (still waiting; Ctrl-C to stop).",
            file=sys.stderr,
            flush=True,
        )
