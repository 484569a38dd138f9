"""`saga worker --processes N`: N forked event loops, each a whole worker (its own
consumer, presence and health port), that drain together on SIGTERM; one that dies
stops the rest, so the pod restarts as a whole."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from saga.api.client import SagaClient
from saga.state.keys import Keys
from saga.state.model import EventType
from saga.state.presence import live_workers
from tests.executor import pipelines
from tests.executor.support import (
    REPO,
    Worker,
    assert_one_commit_per_step,
    free_port,
    saga_and_history,
    status,
    wait_completed,
    wait_until,
)

pytestmark = pytest.mark.anyio


def _two_free_ports() -> int:
    """A port P with P + 1 free as well (each child listens on P + its index)."""
    for _ in range(50):
        port = free_port()
        with contextlib.suppress(OSError), socket.socket() as probe:
            probe.bind(("127.0.0.1", port + 1))
            return port
    raise AssertionError("no two consecutive free ports")


@pytest.fixture
def pod(base_env: dict[str, str], tmp_path: Path) -> Iterator[Any]:
    """Start ``saga worker --processes N``; the parent and every child it forked are
    killed (by pid) at teardown."""
    started: list[Worker] = []
    children: list[int] = []

    def start(n: int, **overrides: str) -> Worker:
        port = _two_free_ports()
        env = {**base_env, "SAGA_HEALTH_PORT": str(port), **overrides}
        log = tmp_path / f"pod-{len(started)}.log"
        with open(log, "ab") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "saga.cli.main", "worker", *pipelines.STEPS,
                 "--processes", str(n)],
                cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT,
            )  # fmt: skip
        w = Worker(proc, port, log, list(pipelines.STEPS))
        started.append(w)
        return w

    start.children = children  # type: ignore[attr-defined]
    yield start
    for w in started:
        w.kill()
    for pid in children:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


async def _children(redis: Any, keys: Keys, parent: Worker, n: int, pod: Any) -> list[int]:
    """The pids of the parent's n children, once each announced itself (presence)."""
    found: list[int] = []

    async def present() -> bool:
        nonlocal found
        found = sorted({p.pid for p in await live_workers(redis, keys)})
        return len(found) == n

    await wait_until(present, within=30, what=f"{n} workers present", on_timeout=parent.tail)
    pod.children.extend(found)
    return found


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is gone for our purpose (its parent, not us, reaps it)
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    return False


async def test_two_processes_drain_a_backlog_each_present_with_its_own_port(
    pod: Any, sagas: SagaClient, redis: Any, keys: Keys
) -> None:
    """Both children are workers of their own (presence, health port P and P + 1); the
    backlog completes with one commit per step; SIGTERM ends all three processes, 0."""
    parent = pod(2)
    pids = await _children(redis, keys, parent, 2, pod)
    assert parent.pid not in pids
    for port in (parent.port, parent.port + 1):

        async def ready(port: int = port) -> bool:
            return await status(port, "/readyz") == 200

        await wait_until(ready, within=30, what=f"/readyz on {port}", on_timeout=parent.tail)
    health = {p.health for p in await live_workers(redis, keys)}
    assert health == {f"127.0.0.1:{parent.port}", f"127.0.0.1:{parent.port + 1}"}

    rids = [f"p-{i}-{uuid.uuid4().hex[:6]}" for i in range(40)]
    for rid in rids:
        await sagas.start(rid, "u1")
    for rid in rids:
        await wait_completed(redis, keys, rid)
        saga, events = await saga_and_history(redis, keys, rid)
        assert_one_commit_per_step(saga, events, pipelines.STEPS)

    parent.signal(signal.SIGTERM)
    assert await parent.wait_exit(within=20) == 0
    assert not [pid for pid in pids if _alive(pid)]
    assert len(parent.logged("worker_stopped")) == 2
    assert await live_workers(redis, keys) == []


async def test_sigterm_drains_the_steps_in_flight_in_every_process(
    pod: Any, sagas: SagaClient, redis: Any, keys: Keys
) -> None:
    """One slow router step in each child (concurrency 1 each): SIGTERM to the parent
    lets both finish and commit before all exit 0."""
    parent = pod(2, SAGA_ROUTER_CONCURRENCY="1", SAGA_DRAIN_SECONDS="20")
    pids = await _children(redis, keys, parent, 2, pod)
    rids = [f"slow-1.5-{uuid.uuid4().hex[:8]}" for _ in range(2)]
    for rid in rids:
        await sagas.start(rid, "u1")

    async def both_running() -> bool:
        states = [(await saga_and_history(redis, keys, rid))[0].state.value for rid in rids]
        return states == ["running", "running"]

    await wait_until(both_running, within=15, what="both routers claimed", on_timeout=parent.tail)
    parent.signal(signal.SIGTERM)
    assert await parent.wait_exit(within=30) == 0
    committers = set()
    for rid in rids:
        _, events = await saga_and_history(redis, keys, rid)
        [router] = [e for e in events if e.event == EventType.COMMITTED and e.step == "router"]
        committers.add(router.worker)
    # each child committed its own: the drain reached both
    assert {int(w.split("-")[-2]) for w in committers} == set(pids)
    assert len(parent.logged("worker_draining")) == 2
    assert not parent.logged("drain_timeout")


async def test_a_child_that_dies_stops_the_others_and_the_pod_exits_non_zero(
    pod: Any, redis: Any, keys: Keys
) -> None:
    """kill -9 of one child: the parent says so, drains the other, exits 128 + 9."""
    parent = pod(2)
    first, second = await _children(redis, keys, parent, 2, pod)
    os.kill(first, signal.SIGKILL)
    assert await parent.wait_exit(within=20) == 128 + signal.SIGKILL
    [exited] = parent.logged("worker_process_exited")
    assert exited["pid"] == first and exited["code"] == 128 + signal.SIGKILL
    assert not _alive(second)


def test_processes_below_one_is_a_usage_error(base_env: dict[str, str]) -> None:
    """--processes 0 and SAGA_WORKER_PROCESSES=0: one sentence, exit 2."""
    argv = [sys.executable, "-m", "saga.cli.main", "worker", "router"]
    done = subprocess.run(
        [*argv, "--processes", "0"], env=base_env, cwd=REPO, capture_output=True, text=True,
        timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 2 and "--processes must be at least 1" in done.stderr
    done = subprocess.run(
        argv, env={**base_env, "SAGA_WORKER_PROCESSES": "0"}, cwd=REPO, capture_output=True,
        text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 2 and "SAGA_WORKER_PROCESSES=0 must be at least 1" in done.stderr
