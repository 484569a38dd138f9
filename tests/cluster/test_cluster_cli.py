"""The operator commands on a Redis Cluster: each reads or writes every partition's
keys on the node that owns them."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest

from saga.state.keys import Keys
from saga.state.model import EventType, SagaState
from saga.state.reads import get_saga_and_history
from tests.cluster.local_cluster import LocalCluster
from tests.cluster.support import STEPS, env_for
from tests.executor.support import REPO, spawn_worker, wait_until

pytestmark = pytest.mark.anyio


async def test_the_operator_commands_work_on_a_cluster(
    cluster: LocalCluster, client: Any, keys: Keys, tmp_path: Path
) -> None:
    """init, start, list, top, dlq, costs, show, cancel and retry read and write every
    partition's keys on their own nodes."""
    env = env_for(cluster, keys, tmp_path)

    async def saga_cli(*args: str) -> Any:
        done = await anyio.run_process(
            [sys.executable, "-m", "saga.cli.main", *args], cwd=REPO, env=env, check=False
        )
        assert done.returncode == 0, (args, done.stderr.decode()[-2000:])
        return msgspec.json.decode(done.stdout) if "--json" in args else done.stdout

    await saga_cli("init", "--json")
    for rid in ("ok-1", "ok-2", "perm-1", "slow-60-1"):
        await saga_cli("start", rid, "u1")
    worker = spawn_worker(env, tmp_path / "worker.log", STEPS)
    try:

        async def settled() -> bool:
            assert worker.alive(), worker.tail()
            got = {r: (await get_saga_and_history(client, keys, r))[0].state for r in
                   ("ok-1", "ok-2", "perm-1", "slow-60-1")}  # fmt: skip
            return got == {"ok-1": SagaState.COMPLETED, "ok-2": SagaState.COMPLETED,
                           "perm-1": SagaState.FAILED, "slow-60-1": SagaState.RUNNING}  # fmt: skip

        await wait_until(settled, within=60, what="sagas settled", on_timeout=worker.tail)

        listed = await saga_cli("list", "--json")
        assert {r["record_id"] for r in listed["sagas"]} == {"ok-1", "ok-2", "perm-1", "slow-60-1"}
        top = await saga_cli("top", "--once", "--json", "--interval", "0")
        by_step = {s["step"]: s for s in top["steps"]}  # summed over partitions on 3 nodes
        assert set(by_step) == set(STEPS)
        router = by_step["router"]
        assert (router["committed"], router["dead"], router["pending"]) == (2, 1, 1)
        assert by_step["grouper"]["committed"] == 2
        dead = await saga_cli("dlq", "list", "--json")
        assert [d["record_id"] for d in dead["dead_letters"]] == ["perm-1"]
        await saga_cli("costs", "--json")
        await saga_cli("cancel", "slow-60-1", "--json")
        await saga_cli(
            "retry", "--step", "router", "--json", "--yes"
        )  # re-runs perm-1: fails again

        async def cancelled_and_refailed() -> bool:
            slow, _ = await get_saga_and_history(client, keys, "slow-60-1")
            perm, events = await get_saga_and_history(client, keys, "perm-1")
            dead_letters = [e for e in events if e.event == EventType.DEAD_LETTERED]
            refailed = perm.state == SagaState.FAILED and len(dead_letters) == 2
            return slow.state == SagaState.CANCELLED and refailed

        await wait_until(cancelled_and_refailed, within=30, what="cancel and re-run")
    finally:
        worker.kill()
