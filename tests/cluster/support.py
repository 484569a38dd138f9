"""What the cluster tests share: the test pipeline's steps, a worker's environment,
sagas started on every partition, and their states and commits read back."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from saga.state.keys import Keys
from saga.state.machine import StateMachine
from saga.state.model import EventType, SagaState
from saga.state.reads import get_saga_and_history
from saga.state.scripts import ensure_loaded
from saga.state.streams import ensure_groups
from tests.cluster.local_cluster import LocalCluster
from tests.executor.support import worker_base_env

STEPS = ("router", "parser", "grouper")


def env_for(cluster: LocalCluster, keys: Keys, tmp_path: Path) -> dict[str, str]:
    """A `saga worker`'s environment, as the executor tests', on the cluster."""
    env = worker_base_env(cluster.url, keys, tmp_path / "saga-data")
    env["SAGA_REDIS_CLUSTER"] = "1"
    return env


async def start_sagas(client: Any, keys: Keys, rids: Sequence[str]) -> StateMachine:
    """Scripts loaded on every primary, groups created, one saga per record at the router."""
    await ensure_loaded(client)
    await ensure_groups(client, keys, STEPS)
    sm = StateMachine(client, keys)
    for rid in rids:
        await sm.start(rid, "u1", "router")
    return sm


async def all_in(client: Any, keys: Keys, rids: Sequence[str], state: SagaState) -> bool:
    got = [(await get_saga_and_history(client, keys, r))[0].state for r in rids]
    return all(s == state for s in got)


async def assert_one_commit_per_step(client: Any, keys: Keys, rids: Sequence[str]) -> None:
    for rid in rids:
        _, events = await get_saga_and_history(client, keys, rid)
        committed = [e.step for e in events if e.event == EventType.COMMITTED]
        assert committed == list(STEPS), (rid, [e.event for e in events])
