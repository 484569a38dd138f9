"""Key rotation under load, real `saga worker` processes on a real server: sagas sealed
under k1 (completed, and dead-lettered with a sealed error detail), then a worker on the
ring k2,k1 runs new sagas while `saga keys rotate` reseals; afterwards nothing is sealed
under k1, every saga reads (and exports) with k2 alone, and each committed once a step."""

from __future__ import annotations

import base64
import json
import re
import signal
import time
from typing import Any

import pytest

from saga.api.client import SagaClient
from saga.config.settings import Settings
from saga.state.keys import Keys
from saga.state.sealing import Sealer
from tests.cli.inspect_support import cli
from tests.cli.test_json_shapes import validate
from tests.controller.support import Procs
from tests.executor import pipelines
from tests.executor.support import (
    assert_one_commit_per_step,
    saga_and_history,
    states,
    wait_until,
)

pytestmark = pytest.mark.anyio

K1, K2 = b"1" * 32, b"2" * 32
RING_K1 = f"k1:{base64.b64encode(K1).decode()}"
RING_K2 = f"k2:{base64.b64encode(K2).decode()}"


K1_MARK = b"\x00sg2\x02k1"
SEALED_TEXT = re.compile(rb"sg1:([A-Za-z0-9+/]+=*)")


def under_k1(value: bytes) -> bool:
    if value.startswith(K1_MARK):
        return True
    return any(base64.b64decode(t).startswith(K1_MARK) for t in SEALED_TEXT.findall(value))


async def walk_for_k1(redis: Any, keys: Keys) -> list[str]:
    """Every key of the prefix, of every type, read whole (independent of what the
    rotation chooses to visit): those holding a value sealed under k1."""
    found = []
    async for raw in redis.scan_iter(match=f"*{keys.prefix}*", count=1000):
        kind = (await redis.type(raw)).decode()
        if kind == "hash":
            values = list((await redis.hgetall(raw)).values())
        elif kind == "string":
            values = [await redis.get(raw)]
        elif kind == "stream":
            values = [v for _, f in await redis.xrange(raw) for v in f.values()]
        elif kind == "zset":
            values = [m for m, _ in await redis.zrange(raw, 0, -1, withscores=True)]
        else:
            values = list(await redis.smembers(raw)) if kind == "set" else []
        if any(under_k1(v) for v in values):
            found.append(raw.decode())
    return found


def with_sealer(keys: Keys, sealer: Sealer) -> Keys:
    return Keys(prefix=keys.prefix, partitions=keys.partitions, sealer=sealer)


async def test_rotation_while_workers_run_leaves_nothing_unreadable_or_lost(
    redis: Any, keys: Keys, redis_url: str, base_env: dict[str, str], procs: Procs
) -> None:
    """k1's values are resealed under k2 while a worker commits new sagas; k1 can then
    leave the ring: every saga opens, exports and shows its one commit per step."""
    k1 = with_sealer(keys, Sealer(keys=[("k1", K1)]))
    ring = with_sealer(keys, Sealer(keys=[("k2", K2), ("k1", K1)]))
    old = [f"old-{i}" for i in range(20)] + [f"retry-{i}" for i in range(5)]
    worker = procs.worker({**base_env, "SAGA_DATA_KEYS": RING_K1}, SAGA_ROUTER_MAX_ATTEMPTS="2")
    await worker.wait_ready(within=90)
    first = SagaClient(redis, k1, pipelines.pipeline(), Settings())
    for rid in old:
        await first.start(rid, "u1")

    async def old_done() -> bool:
        return all(s in ("completed", "failed") for s in await states(redis, keys, old))

    await wait_until(old_done, within=60, what="the sagas under k1", on_timeout=procs.tails)
    assert len(await walk_for_k1(redis, keys)) >= len(old)  # the walk sees k1's values
    worker.signal(signal.SIGTERM)
    assert await worker.wait_exit(within=30) == 0

    ring_keys = {"SAGA_DATA_KEYS": f"{RING_K2},{RING_K1}"}
    ring_env = {**base_env, **ring_keys}
    worker = procs.worker(ring_env, SAGA_ROUTER_CONCURRENCY="4")
    await worker.wait_ready(within=90)
    new = [f"slow-1-{i}" for i in range(24)]  # 4 at a time, a second each: ~6 s of load
    second = SagaClient(redis, ring, pipelines.pipeline(), Settings())
    for rid in new:
        await second.start(rid, "u2")

    async def load_began() -> bool:  # rotate once the worker commits: under load
        return "completed" in await states(redis, keys, new)

    await wait_until(load_began, within=60, what="the new sagas to run", on_timeout=procs.tails)
    began_ms = time.time() * 1000
    rotate = cli(keys, redis_url, "keys", "rotate", "--json", env=ring_keys, timeout=120)
    ended_ms = time.time() * 1000
    assert rotate.returncode == 0, rotate.stderr
    report = json.loads(rotate.stdout)
    validate("keys", report)
    assert report["resealed"] >= len(old) and report["stale"] == {}

    async def new_done() -> bool:
        return await states(redis, keys, new) == ["completed"] * len(new)

    await wait_until(new_done, within=90, what="the sagas under the ring", on_timeout=procs.tails)
    only_k2 = with_sealer(keys, Sealer(keys=[("k2", K2)]))
    commits: list[float] = []  # the worker committed before the rotation began and after it
    for rid in old + new:
        saga, events = await saga_and_history(redis, only_k2, rid)
        commits += [e.at_ms for e in events if e.event == "committed" and rid in new]
        if rid.startswith("retry-"):  # its sealed error detail, in hash, history, dead letter
            assert saga.state == "failed" and saga.error_detail, rid
        else:
            assert_one_commit_per_step(saga, events, pipelines.STEPS)
            assert saga.outputs
    assert min(commits) < began_ms and max(commits) > ended_ms, "the rotation ran under no load"
    assert await walk_for_k1(redis, keys) == []
    status = cli(keys, redis_url, "keys", "status", "--json", env={"SAGA_DATA_KEYS": RING_K2})
    assert status.returncode == 0 and json.loads(status.stdout)["stale"] == {}, status.stderr
    export = cli(keys, redis_url, "export", "--decrypt", env={"SAGA_DATA_KEYS": RING_K2})
    assert export.returncode == 0, export.stderr
    assert len(export.stdout.splitlines()) == len(old) + len(new)


def test_no_key_is_a_usage_error(keys: Keys, redis_url: str) -> None:
    """`saga keys rotate` without any data key: one sentence, exit 2."""
    res = cli(keys, redis_url, "keys", "rotate", env={"SAGA_DATA_KEYS": "", "SAGA_DATA_KEY": ""})
    assert res.returncode == 2 and res.stderr.count("\n") == 1, res.stderr
