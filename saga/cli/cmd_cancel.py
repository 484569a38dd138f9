"""saga cancel <record_id>"""

from __future__ import annotations

import argparse
import getpass
import socket

from saga.cli.common import Exit, print_json, run
from saga.cli.saga_types import add_type_option


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "cancel",
        help="cancel a saga wherever it is",
        description="Cancel a saga. A running attempt is fenced out; "
        "cancelling twice changes nothing.",
    )
    p.add_argument("record_id")
    add_type_option(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=main)


def actor() -> str:
    return f"cli {getpass.getuser()}@{socket.gethostname()}"


def main(args: argparse.Namespace) -> int:
    from saga.settings import load_settings

    settings = load_settings()

    async def go() -> int:
        from saga.client import SagaClient

        async with await SagaClient.for_type(settings, args.saga_type) as sagas:
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
