"""Records that fight back: poison records (permanent errors, endless retries, hangs past
the timeout) among good ones; twenty concurrent starts of one record; operator retries
racing running attempts. Good sagas complete once, poison ones dead-letter, nothing is
enqueued twice and no zombie commit lands."""

from __future__ import annotations

import random
import time

import anyio
import pytest

from saga.api.client import SagaClient
from saga.config.settings import Settings
from saga.state.connection import connect
from saga.state.errors import SagaExistsError
from saga.state.model import EventType, SagaState
from tests.faults import runlog
from tests.faults.harness import FaultRun

pytestmark = pytest.mark.anyio


async def test_poison_records_among_good_ones(run: FaultRun) -> None:
    """perm-, retry- and hang- records dead-letter (at once, after 3 attempts, after 3
    timeouts); the 60 good sagas around them complete; no worker crashes."""
    await run.spawn_ready(2, SAGA_ROUTER_MAX_ATTEMPTS="3", SAGA_ROUTER_TIMEOUT="1")
    poison = [f"{kind}-{i}" for kind in ("perm", "retry", "hang") for i in range(4)]
    good = [f"slow-0.2-{i:03d}" for i in range(60)]
    rids = good[:30] + poison + good[30:]
    await run.start(rids)
    run.faults = len(poison)
    run.fault_end = time.monotonic()
    await run.finish(rids, want=dict.fromkeys(poison, SagaState.FAILED))
    attempts = {rid: (await run.redis.hget(run.keys.saga(rid), "att:router")) for rid in poison}
    assert {rid: int(v.split(b":")[1]) for rid, v in attempts.items()} == {
        rid: 1 if rid.startswith("perm") else 3 for rid in poison
    }


async def test_concurrent_starts_of_one_record(run: FaultRun) -> None:
    """20 clients start one record at once (and 5 as another user): one saga, one
    'started', one ready entry; whichever user's start lands first owns it, and the
    other user is refused every time."""
    clients = [connect(run.server.url) for _ in range(25)]
    outcomes: dict[str, list[str]] = {"u1": [], "u2": []}

    async def start(i: int) -> None:
        sagas = SagaClient(clients[i], run.keys, runlog.pipeline(), Settings())
        user = "u1" if i < 20 else "u2"
        try:
            res = await sagas.start("same-record", user)
            outcomes[user].append("created" if res.created else "existing")
        except SagaExistsError:
            outcomes[user].append("refused")

    try:
        async with anyio.create_task_group() as tg:
            for i in range(25):
                tg.start_soon(start, i)
    finally:
        for c in clients:
            await c.aclose()
    # the clients' first calls (groups, guard) race: either user's start may land first
    owner = (await SagaClient(run.redis, run.keys, runlog.pipeline()).get("same-record")).user_id
    other = "u2" if owner == "u1" else "u1"
    assert sorted(outcomes[owner]) == ["created"] + ["existing"] * (len(outcomes[owner]) - 1)
    assert outcomes[other] == ["refused"] * len(outcomes[other])
    assert (len(outcomes["u1"]), len(outcomes["u2"])) == (20, 5)
    run.faults = 24
    await run.spawn_ready(1)
    await run.finish(["same-record"])
    events = await SagaClient(run.redis, run.keys, runlog.pipeline()).history("same-record")
    assert [e.event for e in events].count(EventType.STARTED) == 1


async def test_retries_racing_running_attempts(run: FaultRun) -> None:
    """Operators retry (force) 30 sagas at random moments while their router runs: each
    retry fences the running attempt; every saga completes in its last epoch, once."""
    await run.spawn_ready(2)
    rids = [f"slow-0.8-{i:03d}" for i in range(30)]
    await run.start(rids)
    sagas = SagaClient(run.redis, run.keys, runlog.pipeline(), Settings())
    rng = random.Random(11)
    for rid in rng.sample(rids, len(rids)):
        await anyio.sleep(rng.uniform(0, 0.1))
        await sagas.retry(rid, step="router", force=True)
        run.faults += 1
    run.fault_end = time.monotonic()
    await run.finish(rids)
    fenced = 0
    for rid in rids:
        saga = await sagas.get(rid)
        assert saga.epoch == 2
        fenced += sum(1 for e in await sagas.history(rid) if e.event == EventType.FENCED)
    assert fenced > 0, "no retry landed on a running attempt"
