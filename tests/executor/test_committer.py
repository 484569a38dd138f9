"""The committer re-sends a batch whose reply was lost until it gets through, and the
re-send is answered from the first call's record: one commit, one history event."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from redis.exceptions import ConnectionError as RedisConnectionError

from saga.state import machine
from saga.state.codes import RC
from saga.state.keys import Keys
from saga.state.machine import StateMachine
from saga.state.model import EventType
from saga.state.reads import get_saga_and_history
from saga.state.requests import CommitRequest
from saga.state.streams import ensure_groups
from saga.worker.committer import Committer
from saga.worker.health import HealthState
from tests.state.helpers import STEPS, claim_next

pytestmark = pytest.mark.anyio


async def test_a_batch_whose_reply_is_lost_is_resent_and_committed_once(
    redis: Any, keys: Keys, monkeypatch: pytest.MonkeyPatch
) -> None:
    await ensure_groups(redis, keys, STEPS)
    sm = StateMachine(redis, keys)
    await sm.start("lost-1", "u1", "router")
    claim = await claim_next(sm, "router", "w-a")
    real, sends = machine.evalsha_many, []

    async def reply_lost_once(client: Any, calls: Any) -> Any:
        replies = await real(client, calls)  # the scripts ran on the server...
        sends.append(len(calls))
        if len(sends) == 1:
            raise RedisConnectionError("connection lost before the reply")  # ...unseen
        return replies

    monkeypatch.setattr(machine, "evalsha_many", reply_lost_once)
    health, downs = HealthState(), []
    down = health.redis_down
    monkeypatch.setattr(health, "redis_down", lambda exc: (downs.append(exc), down(exc)))
    committer = Committer(sm, health)
    runner = asyncio.get_running_loop().create_task(committer.run())
    req = CommitRequest(output=b"{}", next_step="parser", worker="w-a")
    outcome = await asyncio.wait_for(committer.submit(claim, req), 10)
    committer.close()
    await asyncio.wait_for(runner, 10)

    # the lost reply was noted, and the resend's success cleared it
    assert sends == [1, 1] and [type(e).__name__ for e in downs] == ["ConnectionError"]
    assert health.redis_ok and health.last_error == ""
    assert outcome.code == RC.DUPLICATE  # answered from the first call's record
    _, events = await get_saga_and_history(redis, keys, "lost-1")
    assert [e.event for e in events].count(EventType.COMMITTED) == 1
    assert EventType.FENCED not in [e.event for e in events]


async def test_batches_fly_together_up_to_the_limit_and_close_waits_for_all(
    redis: Any, keys: Keys, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Up to max_in_flight batches are sent before any reply; the next waits for room,
    and a close returns only once every queued commit is answered."""
    await ensure_groups(redis, keys, STEPS)
    sm = StateMachine(redis, keys)
    claims = []
    for i in range(4):
        await sm.start(f"fly-{i}", "u1", "router")
        claims.append(await claim_next(sm, "router", "w-a"))
    real = sm.finish_many
    gate, three_flying = asyncio.Event(), asyncio.Event()
    flying: list[int] = []
    peak = 0

    async def held(items: Any, **kw: Any) -> Any:
        nonlocal peak
        flying.append(len(items))
        peak = max(peak, len(flying))
        if len(flying) == 3:
            three_flying.set()
        await gate.wait()  # no reply until the test lets them all land
        try:
            return await real(items, **kw)
        finally:
            flying.pop()

    monkeypatch.setattr(sm, "finish_many", held)
    committer = Committer(sm, HealthState(), max_batch=1, max_in_flight=3)
    runner = asyncio.get_running_loop().create_task(committer.run())
    req = CommitRequest(output=b"{}", next_step="parser", worker="w-a")
    futures = [committer.submit(c, req) for c in claims]

    await asyncio.wait_for(three_flying.wait(), 10)
    assert peak == 3 and not any(f.done() for f in futures)  # the fourth waits for room
    committer.close()
    assert not runner.done()
    gate.set()
    await asyncio.wait_for(runner, 10)  # returns only after the fourth landed too
    assert [f.result().code for f in futures] == [RC.OK] * 4
    assert peak == 3 and committer.batches == 4


async def test_an_error_after_the_reply_reaches_every_attempt_of_the_batch(
    redis: Any, keys: Keys, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch whose outcomes cannot all be handed out (here: one outcome for two
    commits, a defect) fails the attempts still waiting instead of leaving them
    unresolved forever."""
    await ensure_groups(redis, keys, STEPS)
    sm = StateMachine(redis, keys)
    claims = []
    for rid in ("short-1", "short-2"):
        await sm.start(rid, "u1", "router")
        claims.append(await claim_next(sm, "router", "w-a"))
    real = sm.finish_many

    async def one_short(items: Any, **kw: Any) -> Any:
        return (await real(items, **kw))[:1]

    monkeypatch.setattr(sm, "finish_many", one_short)
    committer = Committer(sm, HealthState(), max_batch=2)
    req = CommitRequest(output=b"{}", next_step="parser", worker="w-a")
    futures = [committer.submit(c, req) for c in claims]  # queued before the first send
    runner = asyncio.get_running_loop().create_task(committer.run())
    assert (await asyncio.wait_for(futures[0], 10)).code == RC.OK
    with pytest.raises(ValueError):  # zip(strict=True): the outcome that is missing
        await asyncio.wait_for(futures[1], 10)
    committer.close()
    await asyncio.wait_for(runner, 10)
