"""The litellm embedder against a real OpenAI-compatible server and a real Redis: the
user's key per call, vectors cached across records (a name is paid once), the cost
billed once through the commit like an LLM answer, the embedding breaker respected."""

from __future__ import annotations

import time
from typing import Any

import pytest

from saga.adapters.billing import Secret, StaticKey
from saga.adapters.breaker import EMBEDDING, BreakerPolicy, CircuitBreaker
from saga.adapters.embedding_replies import decode_vector, encode_vector
from saga.adapters.embeddings import EmbeddingConfig, LiteLLMEmbedder
from saga.adapters.llm import CostMeter
from saga.state.keys import Keys
from saga.state.machine import StateMachine
from saga.state.model import Claim
from saga.state.queries import cost_totals
from saga.state.reads import get_saga_and_history
from saga.state.requests import CommitRequest
from saga.state.streams import ensure_groups
from saga.steps.errors import CircuitOpenError, RetryableError
from saga.steps.testing import ngram_vector
from tests.adapters.support import Stub, embeddings_reply, error_reply, free_port, serve
from tests.state.helpers import claim_next, wait_lease_expired

pytestmark = pytest.mark.anyio

MODEL = "openai/text-embedding-3-small"


def embedder(
    redis: Any,
    keys: Keys,
    url: str,
    *,
    record_id: str = "rec-1",
    attempt: int = 1,
    key: str = "sk-user-one",
    breaker: CircuitBreaker | None = None,
) -> tuple[LiteLLMEmbedder, CostMeter]:
    meter = CostMeter()
    config = EmbeddingConfig(model=MODEL, api_base=f"{url}/v1", timeout_s=5)
    found = LiteLLMEmbedder(
        config, redis=redis, keys=keys, record_id=record_id, step="grouper", epoch=1,
        attempt=attempt, api_key=StaticKey(Secret(key)), meter=meter, breaker=breaker,
    )  # fmt: skip
    return found, meter


def inputs(stub: Stub) -> list[list[str]]:
    return [r.body["input"] for r in stub.requests if r.path.endswith("/embeddings")]


async def test_vectors_come_in_order_with_the_users_key_and_a_cost(redis: Any, keys: Keys) -> None:
    """One request with the user's key; vectors in input order; the call's cost metered."""
    with serve(embeddings_reply) as stub:
        client, meter = embedder(redis, keys, stub.url)
        found = await client.embed(["zinc", "selenium", "zinc"])
    assert [r.bearer for r in stub.requests] == ["sk-user-one"]
    assert inputs(stub) == [["zinc", "selenium"]]  # a text once per request
    assert found.vectors[0] == found.vectors[2]
    assert found.vectors[1] == pytest.approx(ngram_vector("selenium"), abs=1e-6)
    assert found.paid == 2 and found.cost > 0
    assert meter.total == pytest.approx(found.cost) and meter.prompt_tokens == 2
    assert len(meter.cache_keys) == 1  # the receipt the commit bills


async def test_a_name_is_never_paid_twice_across_records(redis: Any, keys: Keys) -> None:
    """A second record with the same names makes no call; a new name alone is sent."""
    with serve(embeddings_reply) as stub:
        first, _ = embedder(redis, keys, stub.url, record_id="rec-a")
        await first.embed(["zinc", "selenium"])
        second, meter = embedder(redis, keys, stub.url, record_id="rec-b", key="sk-user-two")
        again = await second.embed(["selenium", "zinc"])
        assert len(inputs(stub)) == 1
        assert (again.paid, again.cost, meter.total, meter.cache_keys) == (0, 0.0, 0.0, [])
        third, _ = embedder(redis, keys, stub.url, record_id="rec-c")
        await third.embed(["zinc", "copper"])
    assert inputs(stub) == [["zinc", "selenium"], ["copper"]]


async def test_cost_is_billed_once_through_the_commit(redis: Any, keys: Keys) -> None:
    """The receipt rides the commit: the saga, its history and `saga costs` carry the
    cost; an attempt killed after paying is billed by the next one, exactly once."""
    await ensure_groups(redis, keys, ["grouper"])
    sm = StateMachine(redis, keys)
    await sm.start("emb-1", "u-1", "grouper")
    first = await claim_next(sm, "grouper", "w1", lease_ms=1)
    with serve(embeddings_reply) as stub:
        client, meter = embedder(redis, keys, stub.url, record_id="emb-1", attempt=first.attempt)
        paid = (await client.embed(["zinc", "selenium"])).cost
        await wait_lease_expired(redis, first.lease_until_ms)  # attempt 1 "was killed"
        second = await reclaim(sm)
        client2, meter2 = embedder(redis, keys, stub.url, record_id="emb-1", attempt=second.attempt)
        assert (await client2.embed(["zinc", "selenium"])).paid == 0
    assert len(inputs(stub)) == 1
    assert meter2.inherited == pytest.approx(paid) and meter2.cache_keys == meter.cache_keys
    done = CommitRequest(output=b"{}", cost_keys=tuple(meter2.cache_keys))
    assert (await sm.commit(second, done)).code.name == "OK"
    saga, _ = await get_saga_and_history(redis, keys, "emb-1")
    assert saga.costs["grouper"] == pytest.approx(paid)
    [row] = await cost_totals(redis, keys, [time.strftime("%Y-%m-%d", time.gmtime())])
    assert (row.user_id, row.step, row.attempts) == ("u-1", "grouper", 1)
    assert row.usd == pytest.approx(paid)


async def reclaim(sm: StateMachine) -> Claim:
    from saga.state import recovery
    from saga.state.replies import text

    found = await recovery.recover_idle(sm, "grouper", 0, worker="w2", min_idle_ms=0)
    pairs = [(e, text(f[b"rid"])) for e, f in found.entries]
    [claimed] = await sm.claim(
        "grouper", 0, pairs, worker="w2", lease_ms=30_000, max_lease_expiries=5
    )
    assert claimed.claim is not None and claimed.claim.attempt == 2
    return claimed.claim


def breaker_for(redis: Any, keys: Keys, failures: int = 2) -> CircuitBreaker:
    policy = BreakerPolicy(failures=failures, window_s=30, cooldown_s=60)
    return CircuitBreaker(redis, keys, EMBEDDING, policy)


async def test_open_breaker_refuses_without_a_call(redis: Any, keys: Keys) -> None:
    """While the embedding breaker is open no request leaves: CircuitOpenError."""
    breaker = breaker_for(redis, keys, failures=1)
    await breaker.record_failure()
    with serve(embeddings_reply) as stub:
        client, meter = embedder(redis, keys, stub.url, breaker=breaker)
        with pytest.raises(CircuitOpenError):
            await client.embed(["zinc"])
    assert stub.requests == [] and meter.total == 0


async def test_server_down_is_retryable_and_counts_against_the_breaker(
    redis: Any, keys: Keys
) -> None:
    """Connection refused and 503 are outages: retryable, and they open the breaker."""
    breaker = breaker_for(redis, keys, failures=2)
    client, _ = embedder(redis, keys, f"http://127.0.0.1:{free_port()}", breaker=breaker)
    with pytest.raises(RetryableError):
        await client.embed(["zinc"])
    with serve(lambda _: error_reply(503)) as stub:
        client, _ = embedder(redis, keys, stub.url, breaker=breaker)
        with pytest.raises(RetryableError):
            await client.embed(["zinc"])
    assert (await breaker.state()).state == "open"


async def test_vector_encoding_round_trips() -> None:
    """float32 with a schema byte; another schema reads as a miss."""
    vector = [0.5, -1.25, 3.0]
    assert decode_vector(encode_vector(vector)) == vector
    assert decode_vector(b"\x02abcd") is None


@pytest.mark.parametrize(
    "data",
    [
        [{"index": 0, "embedding": "AAAA"}],  # base64, not asked for
        [{"index": 0, "embedding": ["x"]}],
        [{"index": 0, "embedding": [0.1]}, {"index": 0, "embedding": [0.2]}],
        [],
    ],
)
async def test_malformed_replies_are_permanent(data: list[dict[str, object]]) -> None:
    """A reply without one numeric vector per text is refused (the grouper falls back)."""
    from types import SimpleNamespace

    from saga.adapters.embedding_replies import response_vectors
    from saga.steps.errors import PermanentError

    with pytest.raises(PermanentError):
        response_vectors(SimpleNamespace(data=data), 1 if len(data) < 2 else 2)


async def gate_check(gate: Any) -> bool:
    await gate.check("u1")  # the spend-only check: no attempt to hold for here
    return False


async def test_a_spent_budget_stops_the_call_before_anything_is_paid(
    redis: Any, keys: Keys
) -> None:
    """The user's budget is spent: no request, no key fetched, BudgetExceededError (the
    grouper then groups offline); cached vectors are still served without a check."""
    from saga.adapters.budget_gate import BudgetGate
    from saga.state import budgets
    from saga.steps.errors import BudgetExceededError

    await budgets.set_budget(redis, keys, "u1", budgets.Budget(daily=0.0))
    gate = BudgetGate(redis, keys)
    with serve(embeddings_reply) as stub:
        cached, _ = embedder(redis, keys, stub.url)
        await cached.embed(["zinc"])  # paid before the check is wired: now cached
        meter = CostMeter()
        config = EmbeddingConfig(model=MODEL, api_base=f"{stub.url}/v1", timeout_s=5)
        checked = LiteLLMEmbedder(
            config, redis=redis, keys=keys, record_id="rec-2", step="grouper", epoch=1,
            attempt=1, api_key=StaticKey(Secret("sk-user-one")), meter=meter,
            budget=lambda _hold, _estimate: gate_check(gate),
        )  # fmt: skip
        assert (await checked.embed(["zinc"])).paid == 0
        with pytest.raises(BudgetExceededError, match="daily LLM budget of user u1"):
            await checked.embed(["zinc", "selenium"])
        assert len(inputs(stub)) == 1 and meter.total == 0.0
