"""saga cancel <record_id> [--compensate]"""

from __future__ import annotations

import argparse
import getpass
import socket
from typing import Any

from saga.cli.common import Exit, print_json, run
from saga.cli.saga_types import add_type_option


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "cancel",
        help="cancel a saga wherever it is",
        description="Cancel a saga. A running attempt is fenced out; "
        "cancelling twice changes nothing. With --compensate, the compensations of its "
        "committed steps then run, latest step first (the saga ends compensated, or "
        "compensation_failed).",
    )
    p.add_argument("record_id")
    p.add_argument(
        "--compensate",
        action="store_true",
        help="undo the committed steps (their compensations run on the steps' workers)",
    )
    add_type_option(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=main)


def actor() -> str:
    return f"cli {getpass.getuser()}@{socket.gethostname()}"


def main(args: argparse.Namespace) -> int:
    from saga.config.settings import load_settings

    settings = load_settings()

    async def go() -> int:
        from saga.api.client import SagaClient

        async with await SagaClient.for_type(settings, args.saga_type) as sagas:
            if args.compensate:
                return await _compensate(sagas, args)
            previous = await sagas.cancel(args.record_id, actor=actor())
        if args.json:
            from saga.cli.shapes import CancelResult
            from saga.state.model import SagaState

            print_json(
                CancelResult(
                    record_id=args.record_id,
                    previous_state=SagaState(previous),
                    state=SagaState.CANCELLED,
                )
            )
        elif previous == "cancelled":
            print(f"saga {args.record_id} was already cancelled")
        else:
            print(f"saga {args.record_id} cancelled (was {previous})")
        return Exit.OK

    return run(go)


async def _compensate(sagas: Any, args: argparse.Namespace) -> int:
    from saga.state.model import SagaState

    previous = (await sagas.get(args.record_id)).state
    res = await sagas.compensate(args.record_id, actor=actor())
    if args.json:
        from saga.cli.shapes import CancelResult

        print_json(
            CancelResult(
                record_id=args.record_id,
                previous_state=previous,
                state=SagaState(res.state),
                first_undo=res.step if res.state == SagaState.COMPENSATING else "",
            )
        )
    elif res.duplicate:
        print(f"saga {args.record_id} is already {res.state}")
    elif res.state == SagaState.COMPENSATED:
        print(f"saga {args.record_id} compensated (was {previous}): nothing needed undoing")
    else:
        print(f"saga {args.record_id} compensating (was {previous}): {res.step} first")
    return Exit.OK
