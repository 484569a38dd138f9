"""The engine on a Redis Cluster: three primaries on this machine, four partitions
spread over them, a real `saga worker` with SAGA_REDIS_CLUSTER=1.

Every script touches keys of one partition's hash tag only, so each runs on the node
that owns that tag; the worker reads each partition's streams with its own
XREADGROUP, and sends commit batches through redis-py's cluster pipeline, which
splits them by node (the single-node fast path needs one connection)."""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest

from saga.state.connection import connect
from saga.state.keys import Keys
from saga.state.machine import StateMachine
from saga.state.model import EventType, SagaState
from saga.state.reads import get_saga_and_history
from saga.state.scripts import ensure_loaded
from saga.state.streams import ensure_groups
from tests.cluster.local_cluster import LocalCluster
from tests.executor.support import REPO, spawn_worker, wait_until

pytestmark = pytest.mark.anyio

STEPS = ("router", "parser", "grouper")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    c = LocalCluster(tmp_path_factory.mktemp("cluster"))
    try:
        c.start()
        yield c
    finally:
        c.stop()


@pytest.fixture
def keys() -> Keys:
    return Keys(prefix=f"c{uuid.uuid4().hex[:8]}", partitions=4)


@pytest.fixture
async def client(cluster: LocalCluster) -> AsyncIterator[Any]:
    c = connect(cluster.url, cluster=True)
    await c.initialize()  # the slot map, before get_node_from_key
    yield c
    await c.aclose()


def env_for(cluster: LocalCluster, keys: Keys, tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SAGA_")}
    env.update(
        REDIS_URL=cluster.url,
        SAGA_REDIS_CLUSTER="1",
        SAGA_KEY_PREFIX=keys.prefix,
        SAGA_PARTITIONS=str(keys.partitions),
        SAGA_DATA_DIR=str(tmp_path / "saga-data"),
        SAGA_PIPELINE="tests.executor.pipelines:pipeline",
        SAGA_LOG_FORMAT="json",
        SAGA_BLOCK_MS="100",
        SAGA_PROMOTE_INTERVAL="0.1",
        PYTHONPATH=str(REPO),
        LITELLM_LOCAL_MODEL_COST_MAP="True",
        PYTHONUNBUFFERED="1",
    )
    return env


async def test_partitions_live_on_different_nodes(client: Any, keys: Keys) -> None:
    """The test below means something only if the partitions' tags span the nodes."""
    owners = {client.get_node_from_key(keys.ready(p, "router")).port for p in range(4)}
    assert len(owners) >= 2


async def test_sagas_complete_on_a_cluster_with_a_retry_and_the_cli_shows_them(
    cluster: LocalCluster, client: Any, keys: Keys, tmp_path: Path
) -> None:
    await ensure_loaded(client)
    await ensure_groups(client, keys, STEPS)
    sm = StateMachine(client, keys)
    rids = [f"ok-{i:03d}" for i in range(40)] + ["once-a", "once-b"]
    for rid in rids:
        await sm.start(rid, "u1", "router")
    assert len({keys.partition_of(r) for r in rids}) == 4

    env = env_for(cluster, keys, tmp_path)
    worker = spawn_worker(env, tmp_path / "worker.log", STEPS)
    try:

        async def all_completed() -> bool:
            assert worker.alive(), worker.tail()
            states = [(await get_saga_and_history(client, keys, r))[0].state for r in rids]
            return all(s == SagaState.COMPLETED for s in states)

        await wait_until(
            all_completed, within=60, what="every saga completed", on_timeout=worker.tail
        )
    finally:
        worker.kill()

    for rid in rids:
        _, events = await get_saga_and_history(client, keys, rid)
        committed = [e.step for e in events if e.event == EventType.COMMITTED]
        assert committed == list(STEPS), (rid, [e.event for e in events])
        assert EventType.FENCED not in [e.event for e in events]
    _, once = await get_saga_and_history(client, keys, "once-a")
    assert EventType.RETRY_SCHEDULED in [e.event for e in once]

    shown = await anyio.run_process(
        [sys.executable, "-m", "saga.cli.main", "show", "once-b", "--json"],
        cwd=REPO, env=env, check=False,
    )  # fmt: skip
    assert shown.returncode == 0, shown.stderr.decode()
    doc = msgspec.json.decode(shown.stdout)
    assert doc["saga"]["state"] == "completed"


async def test_scripts_flushed_from_every_node_are_loaded_again(client: Any, keys: Keys) -> None:
    """After SCRIPT FLUSH on every primary (a failover to a fresh node looks alike), a
    claim and a batch of commits through the cluster pipeline reload and run."""
    from saga.state.keys import GROUP
    from saga.state.machine import CommitRequest

    await ensure_loaded(client)
    await ensure_groups(client, keys, STEPS)
    sm = StateMachine(client, keys)
    rids = [f"flush-{i}" for i in range(8)]
    for rid in rids:
        await sm.start(rid, "u1", "router")
    claims = []
    for p in keys.all_partitions():  # each partition on its node, as the executor reads
        reply = await client.xreadgroup(GROUP, "w-a", {keys.ready(p, "router"): ">"}, count=100)
        pairs = [(i.decode(), f[b"rid"].decode()) for _, rows in reply or [] for i, f in rows]
        outs = await sm.claim("router", p, pairs, worker="w-a", lease_ms=30_000, max_attempts=3)
        claims += [o.claim for o in outs if o.claim is not None]
    assert len(claims) == len(rids)
    await client.script_flush()
    req = CommitRequest(output=b"{}", next_step="parser", worker="w-a")
    outcomes = await sm.finish_many([(c, req) for c in claims])
    assert {o.code for o in outcomes} == {0}
    for rid in rids:
        saga, _ = await get_saga_and_history(client, keys, rid)
        assert (saga.state, saga.step) == (SagaState.PENDING, "parser")


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
        await saga_cli("retry", "--step", "router", "--json")  # re-runs perm-1: fails again

        async def cancelled_and_refailed() -> bool:
            slow, _ = await get_saga_and_history(client, keys, "slow-60-1")
            perm, events = await get_saga_and_history(client, keys, "perm-1")
            dead_letters = [e for e in events if e.event == EventType.DEAD_LETTERED]
            refailed = perm.state == SagaState.FAILED and len(dead_letters) == 2
            return slow.state == SagaState.CANCELLED and refailed

        await wait_until(cancelled_and_refailed, within=30, what="cancel and re-run")
    finally:
        worker.kill()


async def test_a_killed_workers_step_is_reclaimed_on_a_cluster(
    cluster: LocalCluster, client: Any, keys: Keys, tmp_path: Path
) -> None:
    """Recovery (XAUTOCLAIM and the claim script, per partition on its node) takes over
    the step of a SIGKILLed worker once its lease has expired."""
    env = {**env_for(cluster, keys, tmp_path), "SAGA_ROUTER_LEASE": "1",
           "SAGA_RECOVERY_INTERVAL": "0.5"}  # fmt: skip
    await ensure_loaded(client)
    await ensure_groups(client, keys, STEPS)
    sm = StateMachine(client, keys)
    rids = [f"hangonce-{i}" for i in range(4)]
    for rid in rids:
        await sm.start(rid, "u1", "router")
    first = spawn_worker(env, tmp_path / "first.log", STEPS)
    try:

        async def all_running() -> bool:
            assert first.alive(), first.tail()
            got = [(await get_saga_and_history(client, keys, r))[0].state for r in rids]
            return all(s == SagaState.RUNNING for s in got)

        await wait_until(all_running, within=30, what="hung attempts", on_timeout=first.tail)
    finally:
        first.kill()
    second = spawn_worker(env, tmp_path / "second.log", STEPS)
    try:

        async def all_completed() -> bool:
            got = [(await get_saga_and_history(client, keys, r))[0].state for r in rids]
            return all(s == SagaState.COMPLETED for s in got)

        await wait_until(all_completed, within=60, what="reclaimed", on_timeout=second.tail)
    finally:
        second.kill()
    for rid in rids:
        _, events = await get_saga_and_history(client, keys, rid)
        assert EventType.RECLAIMED in [e.event for e in events]


async def test_a_primary_stopped_and_restarted_mid_run_loses_nothing(
    cluster: LocalCluster, client: Any, keys: Keys, tmp_path: Path
) -> None:
    """While one primary is down, its partitions' calls fail to connect and the other
    nodes answer CLUSTERDOWN; the worker waits both out (no crash, no restart) and
    every saga completes with one commit per step once the node is back."""
    env = env_for(cluster, keys, tmp_path)
    await ensure_loaded(client)
    await ensure_groups(client, keys, STEPS)
    sm = StateMachine(client, keys)
    rids = [f"slow-0.05-{i:03d}" for i in range(120)]
    for rid in rids:
        await sm.start(rid, "u1", "router")
    worker = spawn_worker(env, tmp_path / "worker.log", STEPS)
    try:

        async def some_committed() -> bool:
            return bool(worker.logged("step_committed"))

        await wait_until(some_committed, within=30, what="first commits", on_timeout=worker.tail)
        await anyio.to_thread.run_sync(cluster.stop_node, 1)

        async def cluster_down() -> bool:
            return b"cluster_state:fail" in await anyio.to_thread.run_sync(cluster.state, 0)

        await wait_until(cluster_down, within=15, what="CLUSTERDOWN on the other nodes")
        await anyio.sleep(1.5)  # the worker meets the outage (what it does is checked below)
        await anyio.to_thread.run_sync(cluster.restart_node, 1)

        async def all_completed() -> bool:
            assert worker.alive(), worker.tail()
            fresh = connect(cluster.url, cluster=True)
            try:
                got = [(await get_saga_and_history(fresh, keys, r))[0].state for r in rids]
            finally:
                await fresh.aclose()
            return all(s == SagaState.COMPLETED for s in got)

        await wait_until(all_completed, within=90, what="every saga", every=0.5,
                         on_timeout=worker.tail)  # fmt: skip
        assert worker.alive()
    finally:
        worker.kill()
    check = connect(cluster.url, cluster=True)
    try:
        for rid in rids:
            _, events = await get_saga_and_history(check, keys, rid)
            committed = [e.step for e in events if e.event == EventType.COMMITTED]
            assert committed == list(STEPS), (rid, [e.event for e in events])
    finally:
        await check.aclose()
