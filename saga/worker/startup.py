"""A worker's start against Redis, and its consumer groups coming back: load the
scripts, check the partition count and durability, refuse removed steps, create the
groups and register the saga type, retrying until Redis answers."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import anyio
import structlog

from saga.config.settings import Settings
from saga.state import partitions, streams
from saga.state.backoff import resending
from saga.state.durability import check_durability
from saga.state.keys import Keys
from saga.state.scripts import ensure_loaded
from saga.state.types import TypeInfo, register_type
from saga.worker.health import HealthState
from saga.worker.release_steps import refuse_removed_steps
from saga.worker.upkeep import Upkeep

log = structlog.get_logger("saga.worker")


async def prepare(
    client: Any,
    keys: Keys,
    settings: Settings,
    health: HealthState,
    upkeep: Upkeep,
    type_info: TypeInfo,
    steps: Sequence[str],
    worker: str,
    stopping: anyio.Event,
) -> bool:
    """Load scripts and create groups, retrying (at most ~1/s) until Redis answers;
    False if ``stopping`` came first (a SIGTERM must not wait for Redis)."""
    waiting: list[str] = []

    def down(exc: BaseException) -> None:
        if not waiting:  # once: the health endpoint says it for as long as it lasts
            waiting.append(type(exc).__name__)
            log.warning("waiting_for_redis", worker=worker, error=waiting[0])
        health.redis_down(exc)

    async def attempt() -> None:
        await partitions.guard(client, keys)  # refuses a different count
        await check_durability(client, settings.limits)  # fsync: or refuse
        await ensure_loaded(client)
        health.scripts_loaded = True
        await refuse_removed_steps(client, keys, type_info.steps)
        await streams.ensure_groups(client, keys, list(steps))
        await register_type(client, keys, type_info)  # for `saga top`
        health.groups_present = True
        await upkeep.sync_clock()

    ready = False
    async with anyio.create_task_group() as tg:

        async def cancel_on_stop() -> None:
            await stopping.wait()
            tg.cancel_scope.cancel()

        tg.start_soon(cancel_on_stop)
        await resending(attempts=None, on_retry=down)(attempt)
        ready = True
        tg.cancel_scope.cancel()
    if not ready:
        return False
    health.redis_up()
    log.info("worker_started", worker=worker, steps=list(steps))
    return True


async def regroup(
    client: Any, keys: Keys, health: HealthState, steps: Sequence[str], step: str
) -> None:
    """A ready stream's consumer group is gone (``XGROUP DESTROY``, a server restarted
    empty): not ready until the groups are back, recreated at ID 0 so nothing
    enqueued meanwhile is skipped (entries already done are refused as stale)."""
    if health.groups_present:
        health.groups_present = False
        log.warning(
            "consumer_group_missing",
            step=step,
            detail="recreating the consumer groups at 0 (a group was destroyed, or "
            "Redis restarted empty)",
        )
    await streams.ensure_groups(client, keys, list(steps))
    if not health.groups_present:
        health.groups_present = True
        log.info("consumer_groups_recreated", steps=list(steps))
