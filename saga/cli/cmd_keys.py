"""saga keys status | rotate [--json]: values sealed under older data keys, and their
re-sealing under the newest key of SAGA_DATA_KEYS."""

from __future__ import annotations

import argparse
from typing import Any

from saga.cli.common import CliError, Exit, print_json, run


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "keys",
        help="data key rotation: what is sealed under older keys, and re-sealing it",
        description=(
            "SAGA_DATA_KEYS is a ring of data keys, id:base64 pairs, the newest first: the "
            "first seals every new value, every key (and SAGA_DATA_KEY) opens. `status` "
            "counts the values still sealed under another key; `rotate` seals them again "
            "under the first key, in bounded batches, while workers run (a value a worker "
            "rewrites meanwhile is left to it). A key may leave the ring once `status` "
            "counts nothing under it."
        ),
    )
    verbs = p.add_subparsers(dest="verb", metavar="<verb>", required=True)
    for verb, text in (
        ("status", "count the values sealed under keys other than the newest"),
        ("rotate", "seal them again under the newest key (passes until none is left)"),
    ):
        v = verbs.add_parser(verb, help=text)
        v.add_argument("--json", action="store_true")
        v.set_defaults(func=main, apply=verb == "rotate")


def main(args: argparse.Namespace) -> int:
    from saga.config.settings import load_settings

    settings = load_settings()
    if not (settings.data_keys or settings.data_key):
        raise CliError("no data key is set: name the keys in SAGA_DATA_KEYS.", Exit.USAGE)

    async def go() -> int:
        from saga.state.rotation import rotate
        from saga.state.sealing import SealError
        from saga.wiring.runtime import client_for, keys_of

        async with client_for(settings) as client:
            try:
                report = await rotate(client, keys_of(settings), apply=args.apply)
            except SealError as exc:
                raise CliError(f"{exc}: add that key to SAGA_DATA_KEYS.", Exit.FAILED) from None
        if args.json:
            print_json(report)
        else:
            print(render(report, args.apply))
        if args.apply and report.stale:
            raise CliError(
                f"{sum(report.stale.values())} value(s) are still sealed under older keys "
                "(rewritten meanwhile); run `saga keys rotate` again."
            )
        return Exit.OK

    return run(go)


def render(report: Any, applied: bool) -> str:
    current = report.current or "SAGA_DATA_KEY (no id)"
    lines = [f"new values are sealed under {current}"]
    for key_id, count in sorted(report.stale.items()):
        lines.append(f"{count} value(s) still sealed under {key_id or 'SAGA_DATA_KEY'}")
    if applied:
        lines.append(
            f"resealed {report.resealed} value(s) in {report.passes} pass(es) over "
            f"{report.keys_walked} key(s)"
        )
    if not report.stale:
        lines.append("nothing is sealed under an older key: it may leave SAGA_DATA_KEYS")
    return "\n".join(lines)
