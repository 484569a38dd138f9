"""The adapters' side of budget holds, against a local OpenAI-compatible server: a chat
call asks its budget to hold its worst case (prompt tokens x input price + max_tokens x
output price) under its answer-cache key before anything is sent, and sends that
``max_tokens``; an embedding call holds its texts' tokens under its receipt key; a call
the provider refuses leaves its hold id for the attempt's fail to settle; a cache hit
holds nothing."""

from __future__ import annotations

from typing import Any

import pytest

from saga.adapters.billing import Secret, StaticKey
from saga.adapters.budget_estimate import completion_estimate, prices
from saga.adapters.embeddings import EmbeddingConfig, LiteLLMEmbedder
from saga.adapters.llm import CostMeter, LiteLLMClient, LLMConfig
from saga.state.keys import Keys
from saga.steps.errors import RetryableError

from .support import chat_reply, embeddings_reply, error_reply, serve

pytestmark = pytest.mark.anyio

MODEL = "openai/gpt-4o-mini"


class Budget:
    """A budget that records what it was asked to hold (and holds it)."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, float]] = []

    async def __call__(self, hold_id: str, estimate: Any) -> bool:
        self.asked.append((hold_id, await estimate()))
        return True


def _llm(redis: Any, keys: Keys, url: str, budget: Budget, meter: CostMeter) -> LiteLLMClient:
    config = LLMConfig(model=MODEL, api_base=f"{url}/v1", timeout_s=5, max_tokens=500)
    return LiteLLMClient(config, redis=redis, keys=keys, record_id="rec-1", step="parser",
                         api_key=StaticKey(Secret("sk")), meter=meter, budget=budget)  # fmt: skip


async def test_a_chat_call_holds_its_worst_case_under_its_cache_key(redis: Any, keys: Keys) -> None:
    budget, meter = Budget(), CostMeter()
    messages = [{"role": "user", "content": "hello there"}]
    with serve(lambda _: chat_reply("{}", tokens=(9, 200))) as stub:
        llm = _llm(redis, keys, stub.url, budget, meter)
        await llm.complete(messages, purpose="t")
        await llm.complete(messages, purpose="t")  # a cache hit: nothing more held
    [(hold_id, usd)] = budget.asked
    assert hold_id in meter.cache_keys and meter.holds == [hold_id]
    p_in, p_out = prices(MODEL)
    assert p_in > 0 and p_out > 0  # litellm's bundled map prices the model
    assert usd == pytest.approx(completion_estimate(MODEL, messages, 500))
    assert usd >= 500 * p_out and usd > meter.total  # the real answer: 200 tokens
    assert stub.requests[0].body["max_tokens"] == 500
    assert meter.settle_keys() == [hold_id]  # passed once, settled once


async def test_a_refused_call_leaves_its_hold_for_the_fail_to_settle(
    redis: Any, keys: Keys
) -> None:
    budget, meter = Budget(), CostMeter()
    with serve(lambda _: error_reply(503)) as stub:
        llm = _llm(redis, keys, stub.url, budget, meter)
        with pytest.raises(RetryableError):
            await llm.complete([{"role": "user", "content": "hi"}], purpose="t")
    [(hold_id, _)] = budget.asked
    assert meter.cache_keys == [] and meter.settle_keys() == [hold_id]


async def test_an_embedding_call_holds_its_texts_under_its_receipt_key(
    redis: Any, keys: Keys
) -> None:
    budget, meter = Budget(), CostMeter()
    model = "openai/text-embedding-3-small"
    with serve(embeddings_reply) as stub:
        config = EmbeddingConfig(model=model, api_base=f"{stub.url}/v1", timeout_s=5)
        embedder = LiteLLMEmbedder(
            config, redis=redis, keys=keys, record_id="rec-1", step="grouper", epoch=1,
            attempt=1, api_key=StaticKey(Secret("sk")), meter=meter, budget=budget,
        )  # fmt: skip
        await embedder.embed(["zinc", "selenium"])
    [(hold_id, usd)] = budget.asked
    assert usd > 0 and hold_id in meter.cache_keys  # the receipt the commit passes
