"""The litellm client: mock_response, a local OpenAI-compatible server, keys, breaker, cache."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import anyio
import pytest

from saga.adapters.billing import BillingClient, KeyProvider, Secret, StaticKey
from saga.adapters.breaker import BreakerPolicy, BreakerState, CircuitBreaker
from saga.adapters.llm import CostMeter, LiteLLMClient, LLMConfig
from saga.state.keys import Keys
from saga.steps.context import LLM
from saga.steps.errors import CircuitOpenError, PermanentError, RetryableError

from .support import Reply, Request, Stub, chat_reply, error_reply, eventually, scripted, serve

pytestmark = pytest.mark.anyio

ANSWER = '{"biomarkers": [{"name": "HbA1c", "value": 6.1, "unit": "%"}]}'


def ask(text: str) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": "Extract findings as JSON."},
        {"role": "user", "content": text},
    ]


def client(
    redis: Any,
    keys: Keys,
    config: LLMConfig,
    *,
    api_key: KeyProvider | None = None,
    breaker: CircuitBreaker | None = None,
    record_id: str = "rec-1",
) -> LiteLLMClient:
    return LiteLLMClient(
        config,
        redis=redis,
        keys=keys,
        record_id=record_id,
        step="parser",
        api_key=api_key or StaticKey(Secret("sk-static")),
        meter=CostMeter(),
        breaker=breaker,
    )


def local(stub: Stub, timeout_s: float = 5.0) -> LLMConfig:
    return LLMConfig(model="openai/gpt-4o-mini", api_base=f"{stub.url}/v1", timeout_s=timeout_s)


@pytest.fixture
def breaker(redis: Any, keys: Keys) -> CircuitBreaker:
    policy = BreakerPolicy(failures=3, window_s=10, cooldown_s=1.0, probe_ttl_s=10)
    return CircuitBreaker(redis, keys, "llm", policy)


async def test_mock_response_costs_then_hits_cache(redis: Any, keys: Keys) -> None:
    """mock_response answers valid JSON with a cost; the same call again is a free cache hit."""
    config = LLMConfig(model="gpt-4o-mini", extra={"mock_response": ANSWER})
    llm = client(redis, keys, config)
    assert isinstance(llm, LLM)
    first = await llm.complete(ask("page text"), purpose="extract")
    assert json.loads(first.text)["biomarkers"][0]["name"] == "HbA1c"
    assert first.cost > 0 and not first.cached
    assert llm.meter.calls == 1 and llm.meter.total == pytest.approx(first.cost)
    assert llm.meter.prompt_tokens == first.prompt_tokens > 0

    rerun = client(redis, keys, config)  # the step re-run after a crash: a new attempt
    again = await rerun.complete(ask("page text"), purpose="extract")
    assert (again.text, again.cost, again.cached) == (first.text, 0.0, True)
    assert (rerun.meter.calls, rerun.meter.cached_calls, rerun.meter.total) == (0, 1, 0.0)


async def test_cache_is_keyed_by_purpose_and_prompt(redis: Any, keys: Keys) -> None:
    """A different purpose or prompt is a new, paid call."""
    llm = client(redis, keys, LLMConfig(model="gpt-4o-mini", extra={"mock_response": ANSWER}))
    await llm.complete(ask("page one"), purpose="extract")
    await llm.complete(ask("page one"), purpose="repair")
    await llm.complete(ask("page two"), purpose="extract")
    assert (llm.meter.calls, llm.meter.cached_calls) == (3, 0)


async def test_unknown_model_price_costs_zero(redis: Any, keys: Keys) -> None:
    """A model missing from the price table is recorded at cost 0 instead of crashing."""
    config = LLMConfig(model="openai/no-such-model-xyz", extra={"mock_response": ANSWER})
    llm = client(redis, keys, config)
    done = await llm.complete(ask("page"), purpose="extract")
    assert (done.cost, llm.meter.calls) == (0.0, 1)


async def test_local_server_success_carries_the_key(redis: Any, keys: Keys) -> None:
    """A call to the local server returns its answer and sends the user's key as Bearer."""
    with serve(scripted(then=chat_reply(ANSWER))) as stub:
        llm = client(redis, keys, local(stub), api_key=StaticKey(Secret("sk-user-one")))
        done = await llm.complete(ask("page"), purpose="extract")
    assert done.text == ANSWER and done.prompt_tokens == 12 and done.completion_tokens == 5
    assert done.cost > 0 and llm.meter.total == pytest.approx(done.cost)
    [request] = stub.requests
    assert request.path == "/v1/chat/completions"
    assert request.bearer == "sk-user-one"
    assert request.body["response_format"] == {"type": "json_object"}


@pytest.fixture
def rotating_billing() -> Iterator[Stub]:
    """A billing service that hands out a new key for u1 on every fetch."""
    issued = iter(["sk-old", "sk-new", "sk-newer"])

    def handler(_: Request) -> Reply:
        return Reply(200, {"key": next(issued)})

    with serve(handler) as stub:
        yield stub


@pytest.fixture
async def billing(rotating_billing: Stub, redis: Any, keys: Keys) -> AsyncIterator[BillingClient]:
    async with BillingClient(rotating_billing.url, redis, keys, None) as billing:
        yield billing


async def test_401_refetches_the_key_once(
    redis: Any, keys: Keys, billing: BillingClient, rotating_billing: Stub
) -> None:
    """A 401 drops the cached key, fetches a fresh one and the retried call succeeds."""

    def provider(request: Request) -> Reply:
        return chat_reply(ANSWER) if request.bearer == "sk-new" else error_reply(401, "bad key")

    with serve(provider) as stub:
        llm = client(redis, keys, local(stub), api_key=billing.for_user("u1"))
        done = await llm.complete(ask("page"), purpose="extract")
    assert done.text == ANSWER
    assert [r.bearer for r in stub.requests] == ["sk-old", "sk-new"]
    assert rotating_billing.count() == 2
    assert await redis.get(keys.billing_key("u1")) == b"sk-new"


async def test_second_401_is_permanent(
    redis: Any, keys: Keys, billing: BillingClient, breaker: CircuitBreaker
) -> None:
    """Two 401s in a row (the fresh key is rejected too) are a PermanentError."""
    with serve(scripted(then=error_reply(401, "bad key"))) as stub:
        llm = client(redis, keys, local(stub), api_key=billing.for_user("u1"), breaker=breaker)
        with pytest.raises(PermanentError, match="401"):
            await llm.complete(ask("page"), purpose="extract")
    assert len(stub.requests) == 2
    assert (await breaker.state()).failures == 0


async def test_bad_request_is_permanent(redis: Any, keys: Keys) -> None:
    """A 400 from the provider is a PermanentError."""
    with serve(scripted(then=error_reply(400, "invalid"))) as stub:
        llm = client(redis, keys, local(stub))
        with pytest.raises(PermanentError, match="BadRequestError"):
            await llm.complete(ask("page"), purpose="extract")


async def test_bursts_open_the_breaker_then_one_probe_closes_it(
    redis: Any, keys: Keys, breaker: CircuitBreaker
) -> None:
    """429/500s open the breaker (no more requests reach the server); one probe closes it."""
    burst = [error_reply(500), error_reply(429), error_reply(503)]
    with serve(scripted(*burst, then=chat_reply(ANSWER, delay=0.3))) as stub:
        llm = client(redis, keys, local(stub), breaker=breaker)
        for n in range(3):
            with pytest.raises(RetryableError):
                await llm.complete(ask(f"page {n}"), purpose="extract")
        with pytest.raises(CircuitOpenError) as raised:
            await llm.complete(ask("page 3"), purpose="extract")
        assert raised.value.dependency == "llm"
        assert len(stub.requests) == 3

        async def half_open() -> bool:
            return (await breaker.state()).state is BreakerState.HALF_OPEN

        await eventually(half_open)
        refused: list[CircuitOpenError] = []

        async def second_caller() -> None:
            await eventually(lambda: _served(stub, 4))
            with pytest.raises(CircuitOpenError) as raised:
                await llm.complete(ask("page 5"), purpose="extract")
            refused.append(raised.value)

        async with anyio.create_task_group() as tg:
            tg.start_soon(second_caller)
            probe = await llm.complete(ask("page 4"), purpose="extract")
        assert probe.text == ANSWER and len(refused) == 1
        assert (await breaker.state()).state is BreakerState.CLOSED
        await llm.complete(ask("page 6"), purpose="extract")
        assert len(stub.requests) == 5


async def _served(stub: Stub, n: int) -> bool:
    return len(stub.requests) >= n


async def test_timeout_is_retryable(redis: Any, keys: Keys, breaker: CircuitBreaker) -> None:
    """A provider slower than the timeout raises RetryableError and counts a breaker failure."""
    slow = chat_reply(ANSWER, delay=2.0)
    with serve(scripted(then=slow)) as stub:
        llm = client(redis, keys, local(stub, timeout_s=0.3), breaker=breaker)
        with pytest.raises(RetryableError, match="Timeout"):
            await llm.complete(ask("page"), purpose="extract")
    assert (await breaker.state()).failures == 1
    assert llm.meter.calls == 0


async def test_concurrent_users_each_carry_their_own_key(redis: Any, keys: Keys) -> None:
    """Two users' calls in flight together each reach the server with that user's key."""

    users = {"alice": "sk-alice", "bob": "sk-bob"}
    with serve(scripted(then=chat_reply(ANSWER, delay=0.2))) as stub:

        async def call(user: str) -> None:
            key = StaticKey(Secret(users[user]))
            llm = client(redis, keys, local(stub), api_key=key, record_id=f"r-{user}")
            await llm.complete(ask(user), purpose="extract")

        async with anyio.create_task_group() as tg:
            for user in users:
                tg.start_soon(call, user)
    seen = {r.body["messages"][1]["content"]: r.bearer for r in stub.requests}
    assert seen == users
