"""The default ports give the embedder its own breaker: embedding outages open the
``embedding`` breaker and never the ``llm`` one, and an LLM outage leaves embeddings
working (a real OpenAI-compatible server, a real Redis)."""

from __future__ import annotations

from typing import Any

import pytest

from saga.adapters.breaker import EMBEDDING, LLM, NAMES, BreakerState, read_all
from saga.config.groups import BreakerSettings
from saga.config.settings import Settings
from saga.state.keys import Keys
from saga.state.model import Claim
from saga.steps.config import StepConfig
from saga.steps.errors import CircuitOpenError, RetryableError
from saga.wiring.ports import DefaultPorts
from saga.worker.ports import AttemptPorts
from tests.adapters.support import Reply, Request, chat_reply, embeddings_reply, error_reply, serve

pytestmark = pytest.mark.anyio

MODEL = "openai/text-embedding-3-small"
HELLO = [{"role": "user", "content": "say ok"}]


def settings(url: str) -> Settings:
    """One provider for both APIs, two failures open a breaker, a long cool-down."""
    return Settings(
        llm_api_base=f"{url}/v1",
        llm_api_key="sk-test-key",
        llm_timeout_s=5,
        step_config=StepConfig(embedding_model=MODEL),
        breaker=BreakerSettings(failures=2, window_s=30, cooldown_s=600),
    )


def attempt(ports: DefaultPorts, record_id: str) -> AttemptPorts:
    claim = Claim(record_id=record_id, user_id="u1", step="grouper", entry_id="1-0", attempt=1,
                  epoch=1, token="1:1", lease_until_ms=0, input=b"", document="", trace="",
                  created_ms=0)  # fmt: skip
    return ports.for_attempt(claim)


def provider(*, embeddings_down: bool = False, chat_down: bool = False) -> Any:
    def answer(request: Request) -> Reply:
        if request.path.endswith("/embeddings"):
            return error_reply(503) if embeddings_down else embeddings_reply(request)
        return error_reply(503) if chat_down else chat_reply('{"ok": 1}')

    return answer


async def test_embedding_outage_opens_the_embedding_breaker_only(redis: Any, keys: Keys) -> None:
    """Two 503s from the embeddings API open `embedding`; the next embed is refused without
    a request, while `llm` stays closed with no failure and the LLM call goes through."""
    with serve(provider(embeddings_down=True)) as stub:
        ports = DefaultPorts(settings(stub.url), redis, keys)
        try:
            for i in range(2):
                embedder = attempt(ports, f"rec-{i}").embedder
                assert embedder is not None
                with pytest.raises(RetryableError):
                    await embedder.embed(["zinc"])
            ports_now = attempt(ports, "rec-late")
            assert ports_now.embedder is not None and ports_now.llm is not None
            sent = stub.count("/v1/embeddings")
            with pytest.raises(CircuitOpenError) as refused:
                await ports_now.embedder.embed(["zinc"])
            assert refused.value.dependency == EMBEDDING
            assert stub.count("/v1/embeddings") == sent  # refused before a request
            answer = await ports_now.llm.complete(HELLO, purpose="test")
        finally:
            await ports.aclose()
        assert answer.text == '{"ok": 1}' and stub.count("/v1/chat/completions") == 1
    states = await read_all(redis, keys, NAMES)
    assert states[EMBEDDING].state is BreakerState.OPEN
    assert (states[LLM].state, states[LLM].failures) == (BreakerState.CLOSED, 0)


async def test_llm_outage_leaves_embeddings_working(redis: Any, keys: Keys) -> None:
    """Two 503s from the chat API open `llm`; the embedder still gets its vectors."""
    with serve(provider(chat_down=True)) as stub:
        ports = DefaultPorts(settings(stub.url), redis, keys)
        try:
            for i in range(2):
                llm = attempt(ports, f"rec-{i}").llm
                assert llm is not None
                with pytest.raises(RetryableError):
                    await llm.complete(HELLO, purpose="test")
            late = attempt(ports, "rec-late")
            assert late.llm is not None and late.embedder is not None
            with pytest.raises(CircuitOpenError):
                await late.llm.complete(HELLO, purpose="test")
            found = await late.embedder.embed(["zinc", "selenium"])
        finally:
            await ports.aclose()
        assert found.paid == 2 and stub.count("/v1/embeddings") == 1
    states = await read_all(redis, keys, NAMES)
    assert states[LLM].state is BreakerState.OPEN
    assert (states[EMBEDDING].state, states[EMBEDDING].failures) == (BreakerState.CLOSED, 0)


async def test_a_failed_embedding_is_one_request(redis: Any, keys: Keys) -> None:
    """A 503 from the embeddings API is one HTTP request, not three: litellm 1.110 turns
    max_retries=0 into its default of 2 for OpenAI embeddings (``max_retries or
    DEFAULT_MAX_RETRIES``); saga sets that default to 0, since the executor and the
    breaker decide about retries."""
    with serve(provider(embeddings_down=True)) as stub:
        ports = DefaultPorts(settings(stub.url), redis, keys)
        try:
            embedder = attempt(ports, "rec-once").embedder
            assert embedder is not None
            with pytest.raises(RetryableError):
                await embedder.embed(["zinc"])
        finally:
            await ports.aclose()
        assert stub.count("/v1/embeddings") == 1
