"""saga controller [--check] [--json] [--health-port N]"""

from __future__ import annotations

import argparse
from typing import Any

from saga.cli.common import CliError, Exit, colour, print_json, run, table


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "controller",
        help="promote retries, requeue idle entries and export gauges for every step",
        description="Run the controller until SIGTERM/SIGINT: for every step of every "
        "registered saga type (this deployment's pipeline and each type in the registry "
        "of types), including steps scaled to zero, move due retries back to their streams "
        "(the lag this raises wakes KEDA), requeue entries idle past their lease, trim the "
        "streams, and serve /livez, /readyz and /metrics (queue gauges of every step). "
        "Safe to run beside workers and a second controller. Exits 2 if the keyspace's "
        "stored partition count is not SAGA_PARTITIONS, at start or later (`saga "
        "partitions migrate` ran). "
        "With --check: check Redis once (version, every type's consumer groups, scripts, "
        "persistence, "
        "eviction policy) and exit 0 (ok or warnings) or 1 (a check failed).",
    )
    p.add_argument("--check", action="store_true", help="check Redis once and exit")
    p.add_argument("--json", action="store_true", help="with --check: one JSON document")
    p.add_argument("--health-port", type=int, help="health/metrics port (-1: none)")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from saga.config.settings import load_settings
    from saga.wiring.logs import configure_logging
    from saga.wiring.runtime import document_pipeline

    settings = load_settings()
    pipeline = document_pipeline(settings)
    if args.check:
        return run(lambda: _check(settings, pipeline, args.json))
    configure_logging(settings.log_format, settings.log_level)
    from saga.controller.service import serve
    from saga.worker.health import HealthPortError

    async def go() -> int:
        await serve(settings, pipeline, health_port=args.health_port)
        return Exit.OK

    try:
        return run(go)
    except HealthPortError as exc:
        raise CliError(str(exc), Exit.USAGE) from None


async def _check(settings: Any, pipeline: Any, as_json: bool) -> int:
    from saga.controller.check import Status, run_checks
    from saga.state.types import registered_types
    from saga.wiring.runtime import client_for, keys_of

    keys = keys_of(settings, pipeline.name)
    async with client_for(settings) as client:
        others = [
            (keys.of_type(t.name), t.steps)
            for t in await registered_types(client, keys)
            if t.name != pipeline.name
        ]
        checks = await run_checks(client, keys, list(pipeline.names), others)
    failed = any(c.status == Status.FAIL for c in checks)
    if as_json:
        from saga.cli.shapes import ControllerCheckDocument

        print_json(ControllerCheckDocument(ok=not failed, checks=checks))
    else:
        marks = {Status.OK: "32", Status.WARN: "33", Status.FAIL: "31"}
        rows = [(c.name, colour(c.status.value, marks[c.status]), c.detail) for c in checks]
        print(table(["check", "status", "detail"], rows))
    return Exit.FAILED if failed else Exit.OK
