"""saga schedule add NAME --cron "…" [--type T] [--input JSON] [--user U] | list | pause |
resume | rm"""

from __future__ import annotations

import argparse
from typing import Any

from saga.cli.common import CliError, Exit, print_json, run, table
from saga.cli.saga_types import add_type_option

DEFAULT_USER = "scheduler"


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "schedule",
        help="start sagas on a cron: add, list, pause, resume, rm",
        description=(
            "A schedule starts a saga of a type on a cron (five fields, UTC). The saga of "
            "each tick has the record id <name>.<tick, e.g. 20260103T020000>Z, so a tick "
            "fired twice starts one saga. `saga controller` fires them, with or without "
            "workers running; ticks missed while no controller ran are fired once."
        ),
        epilog="Exit codes: 0 done, 1 the name is taken, 2 bad usage, 3 Redis unreachable, "
        "4 no such schedule.",
    )
    verbs = p.add_subparsers(dest="verb", metavar="<verb>", required=True)
    a = verbs.add_parser("add", help="add a schedule (its first tick is the next after now)")
    a.add_argument("name", help="letters, digits and . _ : @ + = - (at most 64)")
    a.add_argument("--cron", required=True, help="'minute hour day month weekday' in UTC")
    add_type_option(a)
    a.add_argument("--input", help="the first step's input as a JSON object (default: none)")
    a.add_argument("--user", default=DEFAULT_USER, help=f"the sagas' user (default {DEFAULT_USER})")
    a.add_argument("--json", action="store_true", help="the schedule (schedule-list shape row)")
    a.set_defaults(func=main_add)
    ls = verbs.add_parser("list", help="every schedule: cron, type, next and last tick")
    ls.add_argument("--json", action="store_true", help='one document {"schedules": [...]}')
    ls.set_defaults(func=main_list)
    for verb, about in (("pause", "stop a schedule's ticks"),
                        ("resume", "tick again, from the next tick after now"),
                        ("rm", "delete a schedule (the sagas it started stay)")):  # fmt: skip
        v = verbs.add_parser(verb, help=about)
        v.add_argument("name")
        v.add_argument("--json", action="store_true")
        v.set_defaults(func=main_change, verb_name=verb)


def _with_client(go: Any) -> int:
    from saga.config.settings import load_settings

    settings = load_settings()

    async def main() -> int:
        from saga.wiring.runtime import client_for, keys_of

        async with client_for(settings) as client:
            return int(await go(client, keys_of(settings), settings))

    return run(main)


def main_add(args: argparse.Namespace) -> int:
    from saga.api.schedules import check_cron, next_fire
    from saga.state import schedules as store
    from saga.state.ids import validate_id

    try:
        cron = check_cron(args.cron)
    except ValueError as exc:
        raise CliError(f"--{exc}.", Exit.USAGE) from None
    store.validate_name(args.name)
    validate_id(args.user, "--user")

    async def go(client: Any, keys: Any, settings: Any) -> int:
        from saga.api.client import SagaClient

        async with await SagaClient.for_type(settings, args.saga_type) as sagas:
            saga_type = sagas.keys.saga_type
            raw = args.input.encode() if args.input else b""
            if raw:
                try:
                    sagas._first_input("", raw)  # the first step must take it
                except ValueError as exc:
                    raise CliError(f"--input: {exc}.", Exit.USAGE) from None
        d = store.ScheduleDefinition(cron=cron, saga_type=saga_type, user_id=args.user,
                                     input=raw.decode())  # fmt: skip
        now = store.now_ms()
        try:
            await store.add(client, keys, args.name, d, next_fire(cron, now))
        except store.ScheduleExistsError as exc:
            raise CliError(f"{exc}.", Exit.FAILED) from None
        return await _show_one(client, keys, args.name, args.json, "added")

    return _with_client(go)


def main_list(args: argparse.Namespace) -> int:
    async def go(client: Any, keys: Any, settings: Any) -> int:
        from saga.cli.shapes import ScheduleList
        from saga.state import schedules as store

        rows = await store.listing(client, keys)
        if args.json:
            print_json(ScheduleList(schedules=rows))
        elif not rows:
            print("no schedules (add one with `saga schedule add NAME --cron '0 2 * * *'`)")
        else:
            print(_table(rows))
        return Exit.OK

    return _with_client(go)


def main_change(args: argparse.Namespace) -> int:
    from saga.state import schedules as store

    name, verb = store.validate_name(args.name), args.verb_name

    async def go(client: Any, keys: Any, settings: Any) -> int:
        from saga.api.schedules import next_fire
        from saga.state.errors import SagaNotFoundError

        try:
            if verb == "pause":
                changed = await store.pause(client, keys, name)
                said = "paused" if changed else "was paused already"
            elif verb == "resume":
                d = await store.definition(client, keys, name)
                nxt = next_fire(d.cron, store.now_ms()) if d else 0
                changed, _ = await store.resume(client, keys, name, nxt)
                said = "resumed" if changed else "was active already"
            else:
                await store.remove(client, keys, name)
                if args.json:
                    print_json({"name": name, "removed": True})
                else:
                    print(f"schedule {name} removed")
                return Exit.OK
        except SagaNotFoundError as exc:
            raise CliError(f"{exc}.", Exit.NOT_FOUND) from None
        return await _show_one(client, keys, name, args.json, said)

    return _with_client(go)


async def _show_one(client: Any, keys: Any, name: str, as_json: bool, said: str) -> int:
    from saga.state import schedules as store

    row = next(r for r in await store.listing(client, keys) if r.name == name)
    if as_json:
        print_json(row)
    else:
        print(f"schedule {name} {said}")
        print(_table([row]))
    return Exit.OK


def _table(rows: list[Any]) -> str:
    return table(
        ["name", "cron", "type", "user", "next (UTC)", "last record"],
        [[r.name, r.cron, r.saga_type, r.user_id, "paused" if r.paused else _utc(r.next_ms),
          r.last_record_id or "-"] for r in rows],
    )  # fmt: skip


def _utc(ms: int) -> str:
    from datetime import UTC, datetime

    return f"{datetime.fromtimestamp(ms / 1000, UTC):%Y-%m-%d %H:%M:%S}"
