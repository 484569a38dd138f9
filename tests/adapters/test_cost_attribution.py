"""An LLM answer's cost is attributed exactly once, by the first attempt that finishes
with it — even when the attempt that paid for it was killed before its commit."""

from __future__ import annotations

from typing import Any

import pytest

from saga.adapters.billing import Secret, StaticKey
from saga.adapters.llm import CostMeter, LiteLLMClient, LLMConfig
from saga.state.keys import Keys
from saga.state.machine import StateMachine
from saga.state.model import Claim, FailAction
from saga.state.reads import get_saga_and_history
from saga.state.requests import CommitRequest, FailRequest
from saga.state.streams import ensure_groups
from tests.state.helpers import claim_next, wait_lease_expired

pytestmark = pytest.mark.anyio

CONFIG = LLMConfig(model="openai/gpt-4o-mini", extra={"mock_response": '{"names": {}}'})
PROMPT = [{"role": "user", "content": "name these analytes"}]


def llm(redis: Any, keys: Keys, claim: Claim) -> tuple[LiteLLMClient, CostMeter]:
    meter = CostMeter()
    client = LiteLLMClient(
        CONFIG, redis=redis, keys=keys, record_id=claim.record_id, step=claim.step,
        api_key=StaticKey(Secret("sk-test")), meter=meter,
    )  # fmt: skip
    return client, meter


async def test_paid_answer_of_a_killed_attempt_is_billed_once(redis: Any, keys: Keys) -> None:
    """Attempt 1 pays and dies; attempt 2 fails with the cached answer (bills it);
    attempt 3 reuses it and commits (bills nothing more): the total is paid once."""
    await ensure_groups(redis, keys, ["router"])
    sm = StateMachine(redis, keys)
    await sm.start("mr-1", "u-1", "router")
    first = await claim_next(sm, "router", "w1", lease_ms=1)
    client, meter = llm(redis, keys, first)
    answer = await client.complete(PROMPT, purpose="names")
    paid = meter.total
    assert paid > 0 and not answer.cached
    await wait_lease_expired(redis, first.lease_until_ms)  # attempt 1 "was killed"

    from saga.state import recovery
    from saga.state.replies import text

    found = await recovery.recover_idle(sm, "router", 0, worker="w2", min_idle_ms=0)
    pairs = [(e, text(f[b"rid"])) for e, f in found.entries]
    second = (await sm.claim("router", 0, pairs, worker="w2", lease_ms=30_000,
                             max_lease_expiries=5))[0].claim  # fmt: skip
    assert second is not None and second.attempt == 2
    client2, meter2 = llm(redis, keys, second)
    assert (await client2.complete(PROMPT, purpose="names")).cached
    assert meter2.total == 0 and meter2.cache_keys
    req = FailRequest(action=FailAction.RETRY, error_class="X", error_message="x",
                      cost_keys=tuple(meter2.cache_keys))  # fmt: skip
    assert (await sm.fail(second, req)).code.name == "OK"
    assert await sm.promote("router", 0, ["mr-1"]) in ((1, 0), (0, 1))
    await sm.promote("router", 0, ["mr-1"])

    third = await claim_next(sm, "router", "w3")
    client3, meter3 = llm(redis, keys, third)
    assert (await client3.complete(PROMPT, purpose="names")).cached
    done = CommitRequest(output=b"{}", cost_keys=tuple(meter3.cache_keys))
    assert (await sm.commit(third, done)).code.name == "OK"

    saga, events = await get_saga_and_history(redis, keys, "mr-1")
    billed = [e.cost for e in events if e.event.value in ("retry_scheduled", "committed")]
    assert billed == [pytest.approx(paid), 0.0]
    assert saga.costs["router"] == pytest.approx(paid)
