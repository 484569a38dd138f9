"""Steps that call the user's LLM, in real worker processes: a paid answer is billed
once across a kill -9, and an open circuit parks steps without spending attempts."""

from __future__ import annotations

import signal
import threading
import uuid
from typing import Any

import msgspec
import pytest

from saga.api.client import SagaClient
from saga.state.keys import Keys
from saga.state.model import EventType
from tests.adapters.support import Reply, Request, chat_reply, error_reply, serve
from tests.executor.conftest import SpawnWorker
from tests.executor.support import (
    assert_one_commit_per_step,
    saga_and_history,
    states,
    wait_claimed,
    wait_completed,
    wait_until,
)

pytestmark = pytest.mark.anyio


async def _cached_answers(redis: Any, keys: Keys, rid: str) -> list[dict[str, Any]]:
    pattern = keys.llm_cache(rid, "router", "x").rsplit(":", 1)[0] + ":*"
    found = [k async for k in redis.scan_iter(match=pattern)]
    return [msgspec.json.decode(await redis.get(k)) for k in found]


async def test_answer_paid_by_a_killed_worker_is_billed_once(
    spawn: SpawnWorker, sagas: SagaClient, redis: Any, keys: Keys
) -> None:
    """kill -9 after the LLM answered: the next attempt reuses the cached answer and its
    commit bills it; the saga's total is what was paid, once."""
    # A worker's first LLM call imports litellm (seconds; tens of seconds on a loaded
    # machine): a timeout above that keeps the attempts as the test means them.
    env = {"SAGA_ROUTER_LEASE": "1", "SAGA_ROUTER_TIMEOUT": "120",
           "SAGA_LLM_MOCK_RESPONSE": '{"ok": true}'}  # fmt: skip
    a, b = spawn(**env), spawn(**env)
    await a.wait_ready()
    await b.wait_ready()
    rid = f"llm-3-{uuid.uuid4().hex[:8]}"
    await sagas.start(rid, "u1")
    victim = await wait_claimed(redis, keys, rid, [a, b])

    async def answered() -> bool:
        return bool(await _cached_answers(redis, keys, rid))

    await wait_until(answered, within=90, what="the LLM answer to be cached")
    victim.signal(signal.SIGKILL)
    await wait_completed(redis, keys, rid, within=30)

    saga, events = await saga_and_history(redis, keys, rid)
    assert_one_commit_per_step(saga, events, ("router", "parser", "grouper"))
    [answer] = await _cached_answers(redis, keys, rid)
    paid = float(answer["cost"])
    assert paid > 0
    router = next(e for e in events if e.event == EventType.COMMITTED and e.step == "router")
    assert router.attempt == 2 and router.cost == pytest.approx(paid)
    assert sum(e.cost for e in events) == pytest.approx(paid)
    assert saga.costs["router"] == pytest.approx(paid)


async def test_open_circuit_parks_steps_without_spending_attempts(
    spawn: SpawnWorker, sagas: SagaClient, redis: Any, keys: Keys
) -> None:
    """5xx bursts open the shared breaker; further attempts park (no attempt spent) and
    every saga completes once the provider is back."""
    down = threading.Event()
    down.set()

    def provider(_: Request) -> Reply:
        return error_reply(500, "upstream down") if down.is_set() else chat_reply('{"ok": 1}')

    with serve(provider) as stub:
        env = {
            "SAGA_LLM_API_BASE": f"{stub.url}/v1",
            "SAGA_LLM_API_KEY": "sk-test-key",
            "SAGA_BREAKER_FAILURES": "2",
            "SAGA_BREAKER_COOLDOWN": "1",
            "SAGA_ROUTER_MAX_ATTEMPTS": "4",
            "SAGA_ROUTER_TIMEOUT": "120",  # the first LLM call imports litellm
        }
        worker = spawn(**env)
        await worker.wait_ready()
        rids = [f"llm-0-{i}-{uuid.uuid4().hex[:6]}" for i in range(5)]
        for rid in rids:
            await sagas.start(rid, "u1")

        async def some_parked() -> bool:
            for rid in rids:
                _, events = await saga_and_history(redis, keys, rid)
                if any(e.event == EventType.PARKED for e in events):
                    return True
            return False

        await wait_until(some_parked, within=90, what="a step parked by the open circuit")
        calls_while_down = len(stub.requests)
        down.clear()

        async def all_done() -> bool:
            return await states(redis, keys, rids) == ["completed"] * len(rids)

        await wait_until(all_done, within=60, what="every saga to complete after recovery")
    # Each saga's first attempt may reach the provider before the circuit opens (they run
    # concurrently); after that only a probe per cool-down does.
    assert calls_while_down <= len(rids) + 2, "an open circuit must stop calls to the provider"
    for rid in rids:
        saga, events = await saga_and_history(redis, keys, rid)
        assert_one_commit_per_step(saga, events, ("router", "parser", "grouper"))
        spent = [e for e in events if e.step == "router" and e.event == EventType.RETRY_SCHEDULED]
        assert len(spent) <= 2, "only the calls that failed spend attempts"
        assert not any(e.event == EventType.DEAD_LETTERED for e in events)


async def test_failed_probes_of_a_long_outage_park_and_spend_nothing(
    spawn: SpawnWorker, sagas: SagaClient, redis: Any, keys: Keys
) -> None:
    """An outage longer than several cool-downs: the failure that opens the circuit spends
    one attempt, every failed probe after it parks; three failed probes with three
    attempts allowed, and the saga is not dead-lettered: it completes once the provider
    is back."""
    down = threading.Event()
    down.set()

    def provider(_: Request) -> Reply:
        return error_reply(503, "upstream down") if down.is_set() else chat_reply('{"ok": 1}')

    with serve(provider) as stub:
        worker = spawn(
            SAGA_LLM_API_BASE=f"{stub.url}/v1",
            SAGA_LLM_API_KEY="sk-test-key",
            SAGA_BREAKER_FAILURES="1",
            SAGA_BREAKER_COOLDOWN="0.3",
            # Three attempts: the opening failure spends one, and a first call slowed by
            # loading litellm on a busy host may spend another; probes must spend none.
            SAGA_ROUTER_MAX_ATTEMPTS="3",
            SAGA_ROUTER_TIMEOUT="120",
        )
        await worker.wait_ready(within=90)  # litellm loads at start: slow on a busy host
        rid = f"llm-0-probe-{uuid.uuid4().hex[:6]}"
        await sagas.start(rid, "u1")

        async def probes_failed() -> bool:
            assert await states(redis, keys, [rid]) != ["failed"], "dead-lettered by probes"
            return len(stub.requests) >= 4  # the opening failure, then three probes

        await wait_until(probes_failed, within=60, what="three failed probes")
        down.clear()
        await wait_completed(redis, keys, rid, within=30)
    saga, events = await saga_and_history(redis, keys, rid)
    assert_one_commit_per_step(saga, events, ("router", "parser", "grouper"))
    router = [e.event for e in events if e.step == "router"]
    assert 1 <= router.count(EventType.RETRY_SCHEDULED) <= 2, router
    assert router.count(EventType.PARKED) >= 3, router
