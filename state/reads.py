"""Reads of saga state for people and scripts: a saga, its history, its attempts."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from saga.state.errors import SagaNotFoundError
from saga.state.history_codec import event_fields
from saga.state.ids import validate_id
from saga.state.keys import Keys
from saga.state.model import EventType, HistoryEvent, Lane, MapItem, MapRun, Saga, SagaState
from saga.state.replies import num, text
from saga.state.sealing import error_detail, error_message


def parse_saga(raw: dict[bytes, bytes], keys: Keys | None = None) -> Saga:
    """A saga from its hash; with ``keys`` holding a data key, sealed fields are opened."""
    f = {text(k): v for k, v in raw.items()}
    if keys is not None and keys.sealer is not None:
        f = {k: keys.unseal(v) if k == "doc" or k.startswith(("out:", "undone:")) else v
             for k, v in f.items()}  # fmt: skip
    attempts, outputs, costs, review, undone = {}, {}, {}, {}, {}
    for name, value in f.items():
        kind, _, step = name.partition(":")
        if kind == "att" and step:
            # "<epoch>:<count>": attempts of an older epoch do not count any more.
            at_epoch, _, count = text(value).partition(":")
            attempts[step] = num(count) if num(at_epoch) == num(f.get("epoch")) else 0
        elif kind == "out" and step and step != "_input":
            outputs[step] = text(value)
        elif kind == "undone" and step:
            undone[step] = text(value)
        elif kind == "cost" and step:
            costs[step] = float(value)
        elif kind == "rv" and step:
            review[step] = text(value)
    state = SagaState(text(f.get("state")))
    # An attempt's token, worker and lease are live only while the saga runs or compensates:
    # a commit to the next step leaves the last attempt's in the hash (commit_steps).
    live = state in (SagaState.RUNNING, SagaState.COMPENSATING)
    return Saga(
        v=num(f.get("v")),
        record_id=text(f.get("rid")),
        user_id=text(f.get("uid")),
        state=state,
        step=text(f.get("step")),
        epoch=num(f.get("epoch")),
        created_ms=num(f.get("created")),
        updated_ms=num(f.get("updated")),
        token=text(f.get("token")) if live else "",
        worker=text(f.get("worker")) if live else "",
        lease_until_ms=num(f.get("lease")) if live else 0,
        claimed_ms=num(f.get("claimed")),
        due_ms=num(f.get("due")),
        wait_event=text(f.get("wev")),
        wait_review=text(f.get("wgate")) == "1",
        lanes=lanes_of(f),
        maps=maps_of(f),
        entry=text(f.get("entry")),
        document=text(f.get("doc")),
        trace=text(f.get("trace")),
        error_class=text(f.get("ec")),
        error_message=error_message(text(f.get("em"))),
        error_detail=error_detail(text(f.get("em")), keys.sealer if keys else None),
        attempts=attempts,
        outputs=outputs,
        undone_outputs=undone,
        costs=costs,
        review=review,
    )


def parse_event(entry_id: Any, fields: dict[bytes, bytes]) -> HistoryEvent:
    """One history entry, packed (schema 2) or one stream field per name (before)."""
    f = {text(k): text(v) for k, v in event_fields(fields).items()}
    return HistoryEvent(
        id=text(entry_id),
        event=EventType(f.get("e", "")),
        at_ms=num(f.get("t")),
        step=f.get("s", ""),
        attempt=num(f.get("a")),
        epoch=num(f.get("ep")),
        worker=f.get("w", ""),
        duration_ms=num(f.get("d")),
        error_class=f.get("ec", ""),
        error_message=error_message(f.get("em", "")),
        cost=float(f.get("c") or 0),
        next_step=f.get("n", ""),
        due_ms=num(f.get("due")),
        detail=error_message(f.get("x", "")),
        previous_attempt=num(f.get("pa")),
        previous_worker=f.get("pw", ""),
        previous_claimed_ms=num(f.get("pt")),
        review=f.get("rv", ""),
        review_decision=f.get("rvd", ""),
        review_version=num(f.get("rvv")),
        step_version=num(f.get("sv")) or 1,
        item=int(f["i"]) if f.get("i", "").isdigit() else -1,
    )


async def get_saga(client: Any, keys: Keys, record_id: str) -> Saga:
    validate_id(record_id)
    raw = await client.hgetall(keys.saga(record_id))
    if not raw:
        raise SagaNotFoundError(f"no saga exists for record {record_id!r}")
    return parse_saga(raw, keys)


async def get_saga_and_history(
    client: Any, keys: Keys, record_id: str, limit: int = 10_000
) -> tuple[Saga, list[HistoryEvent]]:
    """The saga and its history in one round trip."""
    validate_id(record_id)
    pipe = client.pipeline(transaction=False)
    pipe.hgetall(keys.saga(record_id))
    pipe.xrange(keys.history(record_id), count=limit)
    raw, rows = await pipe.execute()
    if not raw:
        raise SagaNotFoundError(f"no saga exists for record {record_id!r}")
    return parse_saga(raw, keys), [parse_event(i, f) for i, f in rows]


async def get_history(client: Any, keys: Keys, record_id: str) -> list[HistoryEvent]:
    return (await get_saga_and_history(client, keys, record_id))[1]


async def get_input(client: Any, keys: Keys, record_id: str) -> str:
    """The saga's first input as it was started (JSON; "" when there is none), opened
    when it is sealed."""
    validate_id(record_id)
    raw = await client.hget(keys.saga(record_id), "out:_input")
    return text(keys.unseal(raw)) if raw else ""


def lanes_of(f: Mapping[str, Any]) -> tuple[Lane, ...]:
    """The lanes in flight of a saga's fields (none unless its branches run now)."""
    live = text(f.get("state")) == "running" and text(f.get("sect")) not in ("", None)
    if not live or text(f.get("sect")) != text(f.get("epoch")):
        return ()
    return tuple(
        Lane(step=step, state=text(f.get(f"ls@{step}")), worker=text(f.get(f"lw@{step}")),
             claimed_ms=num(f.get(f"lc@{step}")))
        for step in text(f.get("lanes")).split()
    )  # fmt: skip


_UNDOING = (SagaState.COMPENSATING, SagaState.COMPENSATED, SagaState.COMPENSATION_FAILED)
_ITEM_STATES = {"p": "pending", "r": "running", "w": "waiting_retry", "d": "done", "f": "failed"}


def maps_of(f: Mapping[str, Any]) -> tuple[MapRun, ...]:
    """The map steps of a saga's fields run in its epoch (``map:<step>``: its counters).
    While it compensates (or after), the epoch is the compensation's: the maps shown are
    their last runs, the ones being undone."""
    epoch, out = text(f.get("epoch")), []
    undoing = text(f.get("state")) in _UNDOING
    for name in sorted(k for k in f if k.startswith("map:")):
        step = name[4:]
        counters = text(f.get(name)).split()
        if len(counters) != 6 or (counters[0] != epoch and not undoing):
            continue
        run = counters[0] if undoing else epoch
        rows = [_item(f, step, i, run) for i in range(min(int(counters[1]), 1000))]
        by = {s: sum(r.state == s for r in rows) for s in _ITEM_STATES.values()}
        out.append(MapRun(step=step, items=len(rows), done=by["done"], running=by["running"],
                          waiting=by["waiting_retry"], failed=by["failed"],
                          pending=by["pending"], rows=tuple(rows)))  # fmt: skip
    return tuple(out)


def _item(f: Mapping[str, Any], step: str, i: int, epoch: str) -> MapItem:
    e, _, letter = text(f.get(f"mi:{step}:{i}")).partition(":")
    state = _ITEM_STATES.get(letter, "pending") if e == epoch else "pending"
    got = text(f.get(f"ma:{step}:{i}")).partition(":")
    return MapItem(
        item=i,
        state=state,
        attempts=int(got[2]) if got[0] == epoch and got[2].isdigit() else 0,
        worker=text(f.get(f"mw:{step}:{i}")) if state == "running" else "",
        error=error_message(text(f.get(f"mr:{step}:{i}")))
        if state in ("waiting_retry", "failed")
        else "",
    )
