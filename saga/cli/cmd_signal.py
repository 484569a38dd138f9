"""saga signal <record_id> <event> [--data JSON] [--id ID]"""

from __future__ import annotations

import argparse

from saga.cli.common import CliError, Exit, print_json, run
from saga.cli.saga_types import add_type_option


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "signal",
        help="deliver an event to a saga's wait (@app.wait)",
        description="Deliver an event to a saga. A saga waiting for it moves on at once "
        "(the data is what its next step gets); one not there yet keeps it until it "
        "arrives. The same --id twice is a no-op, so a script may re-send freely.",
    )
    p.add_argument("record_id")
    p.add_argument("event", help="the event's name, as its @app.wait(event=...) declares it")
    p.add_argument("--data", default="{}", help="the event's data, a JSON object (default {})")
    p.add_argument("--id", dest="signal_id", default="", help="the signal's id (default: new)")
    add_type_option(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=main)


def _data(text: str) -> bytes:
    import msgspec

    try:
        value = msgspec.json.decode(text.encode())
    except msgspec.DecodeError:
        raise CliError("--data is not valid JSON; give a JSON object like '{\"by\":\"ann\"}'.",
                       Exit.USAGE) from None  # fmt: skip
    if not isinstance(value, dict):
        raise CliError('--data must be a JSON object like \'{"by":"ann"}\'.', Exit.USAGE)
    return msgspec.json.encode(value)


def main(args: argparse.Namespace) -> int:
    from saga.config.settings import load_settings

    data = _data(args.data)
    settings = load_settings()

    async def go() -> int:
        from saga.api.client import SagaClient

        async with await SagaClient.for_type(settings, args.saga_type) as sagas:
            res = await sagas.signal(args.record_id, args.event, data=data,
                                     signal_id=args.signal_id)  # fmt: skip
        if args.json:
            print_json(res)
            return Exit.OK
        said = {
            "consumed": f"moved on to {res.next_step}",
            "kept": "kept until the saga reaches its wait",
            "dropped": f"dropped: another {res.event} signal is already kept",
            "seen": "already delivered (same id): nothing changed",
        }.get(res.outcome, res.outcome)
        print(f"signal {res.event} ({res.signal_id}) to saga {res.record_id}: {said}")
        return Exit.OK

    return run(go)
