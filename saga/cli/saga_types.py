"""``--type T``: which saga type an operator command acts on.

The default is this deployment's own type: ``documents`` (the document pipeline),
or the type of the App that ``SAGA_PIPELINE`` names. Another type is looked up in
the registry of types (``saga.state.types``), so a mistyped name is one sentence,
not an empty answer.
"""

from __future__ import annotations

import argparse
from typing import Any

from saga.cli.common import CliError, Exit

OWN = "documents, or the type of the app SAGA_PIPELINE names"


def add_type_option(p: argparse.ArgumentParser, default: str = OWN) -> None:
    p.add_argument("--type", dest="saga_type", metavar="T", help=f"saga type (default: {default})")


def own_type(settings: Any) -> str:
    """This deployment's saga type; imports SAGA_PIPELINE's module only when it is set."""
    from saga.state.keys import DEFAULT_TYPE

    if not settings.pipeline:
        return DEFAULT_TYPE
    from saga.wiring.runtime import document_pipeline

    return document_pipeline(settings).name


async def typed_keys(client: Any, settings: Any, saga_type: str | None) -> Any:
    """The keys of ``saga_type`` (default: this deployment's), which must be registered."""
    from saga.wiring.runtime import keys_of

    own = own_type(settings)
    keys = keys_of(settings, own)
    if saga_type is None or saga_type == own:
        return keys
    await registered(client, keys, saga_type)
    return keys.of_type(saga_type)


async def registered(client: Any, keys: Any, saga_type: str) -> Any:
    """The registry entry (``TypeInfo``) of ``saga_type``, or a usage error naming those known."""
    from saga.state.types import type_info, type_names

    found = await type_info(client, keys, saga_type)
    if found is None:
        known = ", ".join(await type_names(client, keys)) or "none yet"
        raise CliError(
            f"no saga type {saga_type!r} is registered (registered: {known}); "
            "a worker or client of the type registers it.",
            Exit.USAGE,
        )
    return found


async def pipeline_of(client: Any, settings: Any, keys: Any) -> Any:
    """What a client of ``keys``' type needs: this deployment's pipeline for its own
    type, else the type's registered steps."""
    from saga.wiring.runtime import document_pipeline

    own = document_pipeline(settings)
    if keys.saga_type == own.name:
        return own
    return await registered(client, keys, keys.saga_type)
