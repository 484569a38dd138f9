"""saga config: the effective settings, secrets masked."""

from __future__ import annotations

import argparse

from saga.cli.common import Exit, print_json


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("config", help="print the effective settings (secrets masked)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from saga.config.settings import load_settings
    from saga.state.scripts import version

    data = load_settings().masked()
    data["scripts_version"] = version()
    if args.json:
        print_json(data)
        return Exit.OK
    for key, value in data.items():
        print(f"{key:22} {value}")
    return Exit.OK
