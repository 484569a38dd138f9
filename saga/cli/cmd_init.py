"""saga init [--type T]: store the partition count, create consumer groups at ID 0, load the
scripts, register the saga type and move keys of older releases (a Helm hook runs it)."""

from __future__ import annotations

import argparse

from saga.cli.common import Exit, print_json, run
from saga.cli.saga_types import add_type_option


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "init",
        help="create consumer groups and load scripts",
        description="Store SAGA_PARTITIONS in the keyspace (later processes with another "
        "count refuse to run), create every step's consumer group at ID 0 (MKSTREAM) in "
        "every partition, load the Lua scripts and register the saga type in the registry "
        "of types. With --type T, T's steps as registered. Moves the budgets of an older "
        "release to the operators' keys and deletes its console tokens (mint new ones). "
        "Safe to run again; refuses (exit 2) if the keyspace was set up with another "
        "partition count.",
    )
    add_type_option(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from saga.adapters.breaker import ensure_loaded as load_adapter_scripts
    from saga.api.pipeline import Pipeline
    from saga.cli.saga_types import pipeline_of, typed_keys
    from saga.config.settings import load_settings
    from saga.state import scripts, streams
    from saga.state.migrations import migrate
    from saga.state.types import register_type
    from saga.state.upgrade import upgrade_keys
    from saga.wiring.runtime import client_for

    settings = load_settings()

    async def go() -> int:
        async with client_for(settings) as client:  # stores the count, or refuses
            keys = await typed_keys(client, settings, args.saga_type)
            found = await pipeline_of(client, settings, keys)
            own = isinstance(found, Pipeline)  # else T's registry entry: left as it is
            info = found.info() if own else found
            await scripts.ensure_loaded(client, required=True)
            await load_adapter_scripts(client)
            upgraded = await upgrade_keys(client, keys)
            await migrate(client, keys, apply=True)  # what is left to reach this schema
            created = await streams.ensure_groups(client, keys, info.steps)
            if own:
                await register_type(client, keys, info)  # `saga top` and --type find it
        if args.json:
            from saga.cli.shapes import InitDocument

            print_json(
                InitDocument(
                    type=keys.saga_type,
                    steps=list(info.steps),
                    partitions=settings.partitions,
                    groups_created=created,
                    scripts_version=scripts.version(),
                    budgets_moved=upgraded.budgets_moved,
                    console_tokens_dropped=upgraded.console_tokens_dropped,
                )
            )
        else:
            print(
                f"{created} consumer group(s) created for {', '.join(info.steps)} "
                f"in {settings.partitions} partition(s); scripts {scripts.version()} loaded"
            )
            if upgraded.budgets_moved:
                print(f"{upgraded.budgets_moved} budget(s) moved to {keys.budgets()}")
            if upgraded.console_tokens_dropped:
                print(
                    f"{upgraded.console_tokens_dropped} console token(s) of an older release "
                    "deleted (no longer valid); mint new ones with `saga console token add`"
                )
        return Exit.OK

    return run(go)
