"""``saga doctor``: what would stop this release, said where an operator looks."""

from __future__ import annotations

import argparse

from saga.cli.common import Exit, print_json, run
from saga.cli.saga_types import add_type_option


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "doctor",
        help="check the keyspace against this release: schema version, sagas at removed steps",
        description=(
            "Checks the keyspace against this release: its schema version (a newer one is "
            "refused, exit 2, as every command refuses it), and sagas waiting at a step "
            "that some release registered and this one lacks (removed or renamed): one "
            "sentence per step, naming it and how many sagas wait. Exit 1 when one is "
            "served by no live worker (this release's workers would refuse to start), "
            "else 0. Run it from the new release before rolling the workers."
        ),
    )
    add_type_option(p)
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from saga.config.settings import load_settings

    settings = load_settings()

    async def go() -> int:
        from saga.cli.cmd_doctor_report import examine
        from saga.cli.saga_types import pipeline_of, typed_keys
        from saga.wiring.runtime import client_for

        async with client_for(settings) as client:
            keys = await typed_keys(client, settings, args.saga_type)
            found = await pipeline_of(client, settings, keys)
            steps = found.info().steps if hasattr(found, "info") else found.steps
            report = await examine(client, keys, tuple(steps))
        if args.json:
            print_json(report)
        else:
            print(
                f"schema: the keyspace is at version {report.schema_version}; this release "
                f"runs on {report.oldest_runnable} to {report.knows_up_to}"
            )
            for sentence in report.findings or [
                f"steps: no saga of type {report.saga_type!r} waits at a step this release lacks"
            ]:
                print(sentence)
        return Exit.OK if report.ok else Exit.FAILED

    return run(go)
