"""saga init: store the partition count, create consumer groups at ID 0 and load the
scripts (a Helm hook runs it)."""

from __future__ import annotations

import argparse

from saga.cli.common import Exit, print_json, run


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "init",
        help="create consumer groups and load scripts",
        description="Store SAGA_PARTITIONS in the keyspace (later processes with another "
        "count refuse to run), create every step's consumer group at ID 0 (MKSTREAM) in "
        "every partition and load the Lua scripts. Safe to run again; refuses (exit 2) "
        "if the keyspace was set up with another partition count.",
    )
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from saga.runtime import client_for, document_pipeline, keys_of
    from saga.settings import load_settings
    from saga.state import scripts, streams

    settings = load_settings()
    pipeline = document_pipeline(settings)
    keys = keys_of(settings)

    async def go() -> int:
        async with client_for(settings) as client:  # stores the count, or refuses
            await scripts.ensure_loaded(client)
            created = await streams.ensure_groups(client, keys, pipeline.names)
        if args.json:
            from saga.cli.shapes import InitDocument

            print_json(
                InitDocument(
                    steps=list(pipeline.names),
                    partitions=settings.partitions,
                    groups_created=created,
                    scripts_version=scripts.version(),
                )
            )
        else:
            print(
                f"{created} consumer group(s) created for {', '.join(pipeline.names)} "
                f"in {settings.partitions} partition(s); scripts {scripts.version()} loaded"
            )
        return Exit.OK

    return run(go)
