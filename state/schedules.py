"""Schedules in Redis: definitions, next fire times, and the scripts that change them.

A schedule starts a saga of a type on a cron; its tick's saga has the record id
``record_id_of(name, tick)``, so starting it is idempotent (``start_saga``), and
``advance_schedule.lua`` moves the schedule on only from the tick it fired (fenced).
The cron arithmetic is the caller's (``saga.api.schedules``): this module stores times.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

import msgspec

from saga.state.codes import RC
from saga.state.errors import InvalidIdError, SagaNotFoundError, StateError
from saga.state.ids import validate_id
from saga.state.keys import Keys
from saga.state.replies import num, text
from saga.state.scripts import evalsha

MAX_NAME = 64
"""A schedule's name is at most this long: with the tick it makes a record id."""
DUE_BATCH = 100
"""Schedules fired per call at most (a pass loops in batches)."""


class ScheduleDefinition(msgspec.Struct, frozen=True, kw_only=True):
    cron: str
    """Five fields, UTC (``saga.api.schedules`` parses it)."""
    saga_type: str
    user_id: str
    """The user of the sagas it starts (costs, budgets and caps are theirs)."""
    input: str = ""
    """The first step's input as a JSON object ("" : the type's default)."""
    v: int = 1


class Schedule(msgspec.Struct, frozen=True, kw_only=True):
    """A schedule as ``saga schedule list --json`` prints it."""

    name: str
    cron: str
    saga_type: str
    user_id: str
    input: str
    paused: bool
    next_ms: int
    """The next tick (ms since the epoch, UTC); 0 while paused."""
    last_tick_ms: int = 0
    last_record_id: str = ""


class ScheduleExistsError(StateError):
    """Another definition has the schedule's name."""


def validate_name(name: str) -> str:
    validate_id(name, "schedule name")
    if len(name) > MAX_NAME:
        raise InvalidIdError(
            f"schedule name is {len(name)} characters long; the limit is {MAX_NAME}"
        )
    return name


def record_id_of(name: str, tick_ms: int) -> str:
    """The record id of the saga ``name`` starts at ``tick_ms``: the same for every fire of
    that tick (a doubled or redone fire finds the saga), another for every other tick."""
    at = datetime.fromtimestamp(tick_ms / 1000, UTC)
    return f"{name}.{at:%Y%m%dT%H%M%S}Z"


def _keys(keys: Keys) -> list[str]:
    return [keys.schedule_defs(), keys.schedule_due()]


async def add(
    client: Any, keys: Keys, name: str, d: ScheduleDefinition, first_ms: int, *,
    replace: bool = False,
) -> tuple[bool, int]:  # fmt: skip
    """Store ``d`` under ``name``: (changed, next fire ms or -1 paused)."""
    raw = msgspec.json.encode(d)
    changed_timing = "1"
    if replace:
        old = await client.hget(keys.schedule_defs(), validate_name(name))
        if old is not None:
            prev = msgspec.json.decode(old, type=ScheduleDefinition)
            same = (prev.cron, prev.saga_type) == (d.cron, d.saga_type)
            changed_timing = "0" if same else "1"
    args = [validate_name(name), raw, first_ms, "1" if replace else "0", changed_timing]
    reply = await evalsha(client, "add_schedule", _keys(keys), args)
    code = RC(num(reply[0]))
    if code == RC.CONFLICT:
        raise ScheduleExistsError(
            f"a schedule named {name!r} exists already; remove it first or pick another name"
        )
    return code == RC.OK, num(reply[1])


async def pause(client: Any, keys: Keys, name: str) -> bool:
    """True if it was active."""
    reply = await evalsha(client, "pause_schedule", _keys(keys), [validate_name(name)])
    return _found(name, reply) == RC.OK


async def resume(client: Any, keys: Keys, name: str, next_ms: int) -> tuple[bool, int]:
    """(whether it was paused, its next fire ms)."""
    reply = await evalsha(client, "resume_schedule", _keys(keys), [validate_name(name), next_ms])
    return _found(name, reply) == RC.OK, num(reply[1])


async def remove(client: Any, keys: Keys, name: str) -> None:
    k = [*_keys(keys), keys.schedule_last()]
    _found(name, await evalsha(client, "remove_schedule", k, [validate_name(name)]))


async def advance(
    client: Any, keys: Keys, name: str, tick_ms: int, next_ms: int, record_id: str
) -> bool:
    """Move ``name`` from ``tick_ms`` to ``next_ms``; False if its next tick was another."""
    k = [keys.schedule_due(), keys.schedule_last()]
    reply = await evalsha(client, "advance_schedule", k, [name, tick_ms, next_ms, record_id])
    return RC(num(reply[0])) == RC.OK


def _found(name: str, reply: Any) -> RC:
    code = RC(num(reply[0]))
    if code == RC.NOT_FOUND:
        raise SagaNotFoundError(f"no schedule named {name!r} (saga schedule list shows them)")
    return code


async def definition(client: Any, keys: Keys, name: str) -> ScheduleDefinition | None:
    raw = await client.hget(keys.schedule_defs(), name)
    return None if raw is None else msgspec.json.decode(raw, type=ScheduleDefinition)


async def due(
    client: Any, keys: Keys, now_ms: int, limit: int = DUE_BATCH
) -> list[tuple[str, int]]:
    """Active schedules whose next tick is at or before ``now_ms``: (name, tick ms)."""
    rows = await client.zrangebyscore(keys.schedule_due(), "-inf", now_ms, start=0,
                                      num=limit, withscores=True)  # fmt: skip
    return [(text(n), int(score)) for n, score in rows]


async def listing(client: Any, keys: Keys) -> list[Schedule]:
    """Every schedule by name (a bounded read: definitions are few, one HGETALL each)."""
    pipe = client.pipeline(transaction=False)
    pipe.hgetall(keys.schedule_defs())
    pipe.zrange(keys.schedule_due(), 0, -1, withscores=True)
    pipe.hgetall(keys.schedule_last())
    defs, due_rows, last = await pipe.execute()
    nexts = {text(n): int(s) for n, s in due_rows}
    lasts = {text(n): text(v) for n, v in last.items()}
    out = []
    for raw_name, raw in sorted(defs.items()):
        name = text(raw_name)
        d = msgspec.json.decode(raw, type=ScheduleDefinition)
        tick, _, record = lasts.get(name, "").partition("|")
        out.append(Schedule(
            name=name, cron=d.cron, saga_type=d.saga_type, user_id=d.user_id, input=d.input,
            paused=name not in nexts, next_ms=nexts.get(name, 0),
            last_tick_ms=int(tick) if tick else 0, last_record_id=record,
        ))  # fmt: skip
    return out


def now_ms() -> int:
    return int(time.time() * 1000)
