"""saga start <record_id> <user_id> [--document D] [--wait]"""

from __future__ import annotations

import argparse
import sys
import time

from saga.cli.common import CliError, Exit, print_json, run, state_text, table


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "start",
        help="start the saga of a record (idempotent)",
        description="Start the saga of a record. Starting it again returns the existing saga.",
    )
    p.add_argument("record_id")
    p.add_argument("user_id")
    p.add_argument(
        "--document",
        default="",
        help="path or URL of the document "
        "(default: resolved from SAGA_DOCUMENT_SOURCE by the router)",
    )
    p.add_argument("--wait", action="store_true", help="wait for a terminal state")
    p.add_argument("--timeout", type=float, default=0, help="give up waiting after S seconds")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from saga.settings import load_settings
    from saga.telemetry.tracing import configure_tracing

    settings = load_settings()
    stop_tracing = configure_tracing(settings.otel_endpoint, "saga-cli", announce=False)

    async def go() -> int:
        from saga.client import SagaClient

        async with SagaClient.from_settings(settings) as sagas:
            res = await sagas.start(args.record_id, args.user_id, document=args.document)
            if not args.wait:
                _print_started(args, res)
                return Exit.OK
            if not args.json:
                _print_started(args, res)
            return await _wait(sagas, args)

    try:
        return run(go)
    finally:
        stop_tracing()  # flushes the saga's root span


def _print_started(args: argparse.Namespace, res: object) -> None:
    from saga.state.requests import StartResult

    assert isinstance(res, StartResult)
    if args.json:
        print_json(
            {
                "record_id": args.record_id,
                "user_id": args.user_id,
                "created": res.created,
                "state": res.state,
                "step": res.step,
                "epoch": res.epoch,
            }
        )
        return
    verb = "started" if res.created else "already exists"
    print(f"saga {args.record_id} {verb}")
    print(
        table(
            ["record", "user", "state", "step", "epoch"],
            [[args.record_id, args.user_id, state_text(res.state), res.step, res.epoch]],
        )
    )


async def _wait(sagas: object, args: argparse.Namespace) -> int:
    import anyio

    from saga.client import SagaClient
    from saga.state.model import SagaState

    assert isinstance(sagas, SagaClient)
    deadline = time.monotonic() + args.timeout if args.timeout else None
    last = ""
    while True:
        saga = await sagas.get(args.record_id)
        line = f"{saga.state.value} at {saga.step} (attempt {saga.attempts.get(saga.step, 0)})"
        if line != last and not args.json:
            end = "\n" if not sys.stdout.isatty() else ""
            print(("\r\033[K" if sys.stdout.isatty() else "") + "  " + line, end=end, flush=True)
            last = line
        if saga.state.terminal:
            if sys.stdout.isatty() and not args.json:
                print()
            if args.json:
                print_json(saga)
            elif saga.state != SagaState.COMPLETED:
                print(f"  {saga.error_class}: {saga.error_message}" if saga.error_class else "")
            return Exit.OK if saga.state == SagaState.COMPLETED else Exit.FAILED
        if deadline is not None and time.monotonic() > deadline:
            raise CliError(
                f"saga {args.record_id} is still {saga.state.value} at {saga.step} after "
                f"{args.timeout:g}s; follow it with `saga show {args.record_id} --follow`",
                Exit.FAILED,
            )
        await anyio.sleep(0.25)
