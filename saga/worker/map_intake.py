"""A map step's reads (``saga.api.app_maps``): entries are the map's own (its parent
committed: the claim spawns the items) or one item's (``i``: its index), claimed by
``claim_items``; the map's due item retries go back to its stream here too."""

from __future__ import annotations

from collections.abc import Container
from typing import Any

import structlog

from saga.api.pipeline import Pipeline, StepSpec
from saga.state import map_calls
from saga.state.codes import RC
from saga.state.machine import StateMachine, new_op
from saga.state.map_calls import MapPlan
from saga.state.replies import ClaimOutcome
from saga.worker.intake import claimable
from saga.worker.observer import Observer

log = structlog.get_logger("saga.worker")


def map_plans(pipeline: Pipeline, specs: list[StepSpec]) -> dict[str, MapPlan]:
    """What the map scripts need of each map step among ``specs``."""
    out = {}
    for spec in specs:
        if spec.map is not None:
            out[spec.name] = MapPlan(
                over=spec.map.over,
                next_step=pipeline.next_of(spec.name),
                concurrency=spec.map.concurrency,
                on_failure=spec.map.on_failure,
                undo=pipeline.undoable(),
            )
    return out


async def claim_map_entries(
    sm: StateMachine,
    observer: Observer,
    spec: StepSpec,
    partition: int,
    entries: list[Any],
    running: Container[tuple[str, int, str]],
    worker: str,
) -> list[ClaimOutcome]:
    """Claim what one read of a map step's stream returned (spawns and items)."""
    items = {_text(raw_id): _item(fields) for raw_id, fields in entries}
    pairs = await claimable(sm, observer, spec.name, partition, entries, running)
    triples = [(e, r, *items.get(e, ("", 0))) for e, r in pairs]
    outcomes: list[ClaimOutcome] = []
    for i in range(0, len(triples), 100):
        outcomes += await map_calls.claim_items(
            sm,
            spec.name,
            partition,
            triples[i : i + 100],
            plan=sm.maps[spec.name],
            worker=worker,
            lease_ms=int(spec.lease_s * 1000),
            max_lease_expiries=spec.retry.max_lease_expiries,
            op=new_op(),
        )
    if spec.loads_pages:
        outcomes = await map_calls.with_pages(sm, outcomes)
    for out in outcomes:
        if out.code == RC.SPAWNED:
            log.info("map_spawned", step=spec.name, record_id=out.record_id, items=out.detail)
    return [o for o in outcomes if o.code != RC.SPAWNED]


async def promote_item_retries(sm: StateMachine) -> int:
    """Due item retries of every map step this executor runs (``sm.maps``) back to their
    streams; the claim re-checks each item."""
    total = 0
    for step in sm.maps:
        for p in sm.keys.all_partitions():
            total += await map_calls.promote_items(sm, step, p)
    return total


def _text(raw: Any) -> str:
    return raw.decode() if isinstance(raw, bytes) else str(raw)


def _item(fields: Any) -> tuple[str, int]:
    """The entry's item index ("": the map's own entry) and epoch."""
    got = fields or {}
    item, epoch = _text(got.get(b"i", b"")), _text(got.get(b"ep", b""))
    return (item if item.isdigit() else ""), int(epoch) if epoch.isdigit() else 0
