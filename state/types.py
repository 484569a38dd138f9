"""The registry of saga types sharing one Redis: each type's steps, in order.

A worker or client registers its type when it creates the type's consumer groups
(one HSET on ``<prefix>:types``). ``saga top`` lists every type from it, and
``--type T`` finds T's steps there, so the CLI can start, retry and list sagas of
a type whose code it does not have — never by scanning the keyspace.
"""

from __future__ import annotations

import contextlib
from typing import Any

import msgspec

from saga.state.errors import InvalidIdError, UnknownEventError
from saga.state.ids import validate_step
from saga.state.keys import DEFAULT_TYPE, Keys, validate_type
from saga.state.replies import text

SCHEMA = 1


class TypeInfo(msgspec.Struct, frozen=True, kw_only=True):
    """What the operator surface needs of a saga type: its steps in order, and which
    steps read the pages blob (a retry from one whose pages are gone starts earlier)."""

    name: str
    steps: tuple[str, ...]
    loads_pages: tuple[str, ...] = ()
    undoable: tuple[str, ...] = ()
    """The steps that have a compensation, latest first (``saga cancel --compensate``)."""
    parents: tuple[tuple[str, tuple[str, ...]], ...] = ()
    """Each step's parents when the type has branches (``Pipeline.graph``); () for a chain."""
    lanes: tuple[str, ...] = ()
    """The steps that run in parallel with another (``Pipeline.lanes``)."""
    events: tuple[str, ...] | None = None
    """The events its waits declare (``@app.wait(event=...)``); a signal for another is
    refused. None: registered by a release that did not record them (nothing refused)."""
    v: int = SCHEMA

    def __post_init__(self) -> None:
        validate_type(self.name)
        for step in self.steps + self.undoable:
            validate_step(step)
        if not self.steps:
            raise InvalidIdError(f"saga type {self.name!r} has no steps")

    def check_event(self, event: str) -> None:
        """UnknownEventError unless a wait of this type waits for ``event``."""
        if self.events is None or event in self.events:
            return
        waits = ", ".join(self.events) if self.events else "none"
        raise UnknownEventError(
            f"saga type {self.name!r} never waits for event {event!r} (its events: {waits})"
        )

    @property
    def first(self) -> str:
        return self.steps[0]

    def prev_of(self, step: str) -> str:
        """The step whose output ``step`` reads ("_input" for the first; a join's first
        parent)."""
        i = self.index(step)
        if self.parents:
            ps = dict(self.parents).get(step, ())
            return ps[0] if ps else "_input"
        return self.steps[i - 1] if i > 0 else "_input"

    def retry_from(self, step: str) -> str:
        """Where a re-run of ``step`` starts: a branch (a lane) re-runs from the latest
        step before it that is not in parallel with another, so every branch and the join
        run again in one epoch (a join fires only on its parents' commits of one epoch)."""
        parents = dict(self.parents)
        for _ in range(len(self.steps)):
            if step not in self.lanes:
                return step
            step = parents[step][0]
        return step

    def index(self, step: str) -> int:
        if step not in self.steps:
            raise KeyError(f"unknown step {step!r}; the pipeline has {', '.join(self.steps)}")
        return self.steps.index(step)


_decoder = msgspec.json.Decoder(TypeInfo)


async def register_type(client: Any, keys: Keys, info: TypeInfo) -> None:
    """Record (or update) ``info`` under its name; the last writer wins, so a release
    that adds a step updates the order as its workers start."""
    await client.hset(keys.types_registry(), info.name, msgspec.json.encode(info))


async def registered_types(client: Any, keys: Keys) -> list[TypeInfo]:
    """Every registered type, by name. An entry that cannot be read is skipped."""
    found = []
    raw = await client.hgetall(keys.types_registry())
    for name, value in sorted((text(k), v) for k, v in raw.items()):
        with contextlib.suppress(msgspec.ValidationError, msgspec.DecodeError, InvalidIdError):
            info = _decoder.decode(value)
            if info.name == name:
                found.append(info)
    return found


async def type_info(client: Any, keys: Keys, name: str) -> TypeInfo | None:
    """The registered type ``name``, or None."""
    value = await client.hget(keys.types_registry(), validate_type(name))
    if value is None:
        return None
    try:
        return _decoder.decode(value)
    except (msgspec.ValidationError, msgspec.DecodeError, InvalidIdError):
        return None


async def type_names(client: Any, keys: Keys) -> list[str]:
    """Registered type names, plus the default type when its steps are registered (an
    install from before types registers none until its workers restart)."""
    names = {t.name for t in await registered_types(client, keys)}
    if DEFAULT_TYPE not in names and await client.exists(
        keys.of_type(DEFAULT_TYPE).steps_registry()
    ):
        names.add(DEFAULT_TYPE)
    return sorted(names)
