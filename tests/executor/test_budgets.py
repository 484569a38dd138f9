"""Per-user LLM budgets through the real CLI, worker processes and a local
OpenAI-compatible server that reports token usage: a user at their budget has
model-calling steps parked (no call, no attempt spent), visible everywhere, woken by
a raise or a clear, retried like any parked step; N workers overshoot the budget by
no more than the calls in flight when it was reached."""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Iterator
from typing import Any

import anyio
import pytest

from saga.api.client import SagaClient
from saga.state.budgets import next_day
from saga.state.keys import Keys
from saga.state.model import EventType
from saga.state.replies import text
from tests.adapters.support import Stub, chat_reply, serve
from tests.cli.inspect_support import cli, cli_json
from tests.executor.conftest import SpawnWorker
from tests.executor.support import Worker, saga_and_history, wait_completed, wait_until

pytestmark = pytest.mark.anyio

TOKENS = (10_000, 1_000)
"""Per call: $0.0021 at gpt-4o-mini's prices in litellm's local cost map."""


@pytest.fixture
def provider() -> Iterator[Stub]:
    """The model: every answer reports TOKENS of usage, after a short think."""
    with serve(lambda _: chat_reply('{"ok": true}', tokens=TOKENS, delay=0.3)) as stub:
        yield stub


def llm_env(stub: Stub, **more: str) -> dict[str, str]:
    return {"SAGA_LLM_API_KEY": "sk-test", "SAGA_LLM_API_BASE": f"{stub.url}/v1",
            "SAGA_LLM_MODEL": "openai/gpt-4o-mini", "SAGA_BUDGET_REFRESH": "0.2",
            "SAGA_ROUTER_TIMEOUT": "120", **more}  # fmt: skip


def calls(stub: Stub) -> int:
    return stub.count("/v1/chat/completions")


async def state_of(redis: Any, keys: Keys, rid: str) -> tuple[str, str]:
    state, ec = await redis.hmget(keys.saga(rid), ["state", "ec"])
    return text(state), text(ec)


async def wait_parked(redis: Any, keys: Keys, rid: str, within: float = 60) -> None:
    async def parked() -> bool:
        return await state_of(redis, keys, rid) == ("waiting_retry", "BudgetExceededError")

    await wait_until(parked, within=within, what=f"{rid} parked for its budget", every=0.05)


async def metrics_text(worker: Worker) -> str:
    import urllib.request

    def get() -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{worker.port}/metrics", timeout=5) as r:
            return str(r.read().decode())

    return await anyio.to_thread.run_sync(get)


async def test_a_spent_budget_parks_without_a_call_and_a_raise_wakes_it(
    spawn: SpawnWorker, sagas: SagaClient, redis: Any, keys: Keys, redis_url: str,
    provider: Stub,
) -> None:  # fmt: skip
    """Under a budget smaller than one call's real cost (but not its estimate: answers are
    held at SAGA_LLM_MAX_TOKENS=1000, and the model reports more prompt tokens than were
    sent): the first call goes through, the next saga of
    that user parks (reason budget, attempt refunded, due at the next UTC day, no call)
    and shows so in show/list/top/budget show/metrics, while another user's runs; raising
    the budget wakes it at once; retry re-runs it (and it parks again while spent)."""
    worker = spawn("router", "parser", "grouper", **llm_env(provider, SAGA_LLM_MAX_TOKENS="1000"))
    await worker.wait_ready(within=120)
    assert cli(keys, redis_url, "budget", "set", "u1", "--daily", "0.001").returncode == 0
    tag = uuid.uuid4().hex[:6]
    first, second, other = f"llm-0-a{tag}", f"llm-0-b{tag}", f"llm-0-c{tag}"
    await sagas.start(first, "u1")
    await wait_completed(redis, keys, first, within=120)
    await sagas.start(second, "u1")
    await sagas.start(other, "u2")
    await wait_parked(redis, keys, second)
    await wait_completed(redis, keys, other, within=60)
    assert calls(provider) == 2  # the first saga's and u2's: none for the parked one

    saga, events = await saga_and_history(redis, keys, second)
    assert saga.attempts.get("router", 0) == 0, "a parked attempt is not spent"
    assert saga.due_ms >= next_day(time.time()) * 1000 - 5_000
    assert [e.event for e in events][-1] == EventType.PARKED
    shown = cli_json(keys, redis_url, "show", second)["saga"]
    assert shown["parked_reason"] == "budget" and shown["state"] == "waiting_retry"
    human = cli(keys, redis_url, "show", second)
    assert re.search(r"state\s+parked \(budget\)", human.stdout), human.stderr
    listed = cli_json(keys, redis_url, "list", "--state", "parked")["sagas"]
    assert [(r["record_id"], r["parked_reason"]) for r in listed] == [(second, "budget")]
    [status] = cli_json(keys, redis_url, "budget", "show", "u1")["budgets"]
    assert status["exceeded"] == "daily" and status["daily_usd"] == 0.001
    assert status["spent_today_usd"] == pytest.approx(status["spent_month_usd"])
    assert status["spent_today_usd"] > 0.001
    assert status["resumes_at_ms"] == next_day(time.time()) * 1000
    [router] = [s for s in cli_json(keys, redis_url, "top", "--once")["steps"]
                if s["step"] == "router"]  # fmt: skip
    assert router["parked"] == 1
    parked = r'^saga_steps_parked_total\{[^}]*step="router"[^}]*\} 1'
    assert re.search(parked, await metrics_text(worker), re.MULTILINE)

    raised = cli(keys, redis_url, "budget", "set", "u1", "--daily", "1", "--monthly", "5")
    assert raised.returncode == 0 and "1 parked step woken" in raised.stdout, raised.stdout
    await wait_completed(redis, keys, second, within=60)
    assert calls(provider) == 3

    assert cli(keys, redis_url, "budget", "set", "u1", "--daily", "0.001").returncode == 0
    third = f"llm-0-d{tag}"
    await sagas.start(third, "u1")
    await wait_parked(redis, keys, third)
    assert cli(keys, redis_url, "retry", third).returncode == 0

    async def parked_again() -> bool:
        saga, events = await saga_and_history(redis, keys, third)
        return saga.epoch == 2 and [e.event for e in events][-1] == EventType.PARKED

    await wait_until(parked_again, within=60, what="the retried saga to park again")
    cleared = cli_json(keys, redis_url, "budget", "clear", "u1")
    assert cleared == {"user_id": "u1", "cleared": True, "woken": 1}
    await wait_completed(redis, keys, third, within=60)
    assert calls(provider) == 4
    assert cli_json(keys, redis_url, "budget", "show")["budgets"] == []


def test_budget_cli_refuses_bad_input(keys: Keys, redis_url: str) -> None:
    """No limit, a negative amount or a bad user id: one sentence, exit 2 (usage)."""
    for args, says in (
        (("set", "u1"), "give --daily USD, --monthly USD or both"),
        (("set", "u1", "--daily", "-1"), "must be a positive amount"),
        (("set", "u1", "--daily", "lots"), "is not an amount in USD"),
        (("set", "bad user", "--daily", "1"), "user id"),
    ):
        res = cli(keys, redis_url, "budget", *args)
        assert res.returncode == 2, (args, res.stdout, res.stderr)
        assert says in res.stderr and "Traceback" not in res.stderr, res.stderr
    shown = cli(keys, redis_url, "budget", "show")
    assert shown.returncode == 0 and "no budgets set" in shown.stdout


IN_FLIGHT = 20
SAGAS = 60


async def test_concurrent_workers_overshoot_by_at_most_the_estimate_errors_in_flight(
    spawn: SpawnWorker, sagas: SagaClient, redis: Any, keys: Keys, redis_url: str,
    provider: Stub,
) -> None:  # fmt: skip
    """Two workers with 20 router attempts in flight between them, 60 sagas of one user
    against a budget of about two calls, and a model that reports more tokens than it was
    sent (10,000 prompt tokens for a one-line prompt): every call holds its estimate, so
    the spend passes the budget by no more than 20 x one call's estimate error (its real
    cost less its estimate), every call made is billed, the rest park."""
    env = llm_env(provider, SAGA_ROUTER_CONCURRENCY=str(IN_FLIGHT // 2),
                  SAGA_LLM_MAX_TOKENS="1000")  # fmt: skip
    workers = [spawn("router", **env), spawn("router", **env)]
    for w in workers:
        await w.wait_ready(within=120)
    budget = 0.005
    assert cli(keys, redis_url, "budget", "set", "flood", "--daily", str(budget)).returncode == 0
    rids = [f"llm-0-f{i:03d}-{uuid.uuid4().hex[:4]}" for i in range(SAGAS)]
    for rid in rids:
        await sagas.start(rid, "flood")

    async def settled() -> list[tuple[str, str]]:
        pipe = redis.pipeline(transaction=False)
        for rid in rids:
            pipe.hmget(keys.saga(rid), ["step", "ec"])
        return [(text(step), text(ec)) for step, ec in await pipe.execute()]

    async def all_settled() -> bool:
        # router committed (the saga moved on to the parser, which no worker serves) or parked
        return all(s == "parser" or ec == "BudgetExceededError" for s, ec in await settled())

    await wait_until(all_settled, within=180, what="every saga to pass the router or park")
    outcomes = await settled()
    passed = [rid for rid, (s, _) in zip(rids, outcomes, strict=True) if s == "parser"]
    parked = len(rids) - len(passed)
    costs = [float(text(await redis.hget(keys.saga(rid), "cost:router")) or 0) for rid in passed]
    per_call = max(costs)
    error = per_call - 1000 * 0.6e-6  # an estimate holds at least 1000 answer tokens
    [status] = cli_json(keys, redis_url, "budget", "show", "flood")["budgets"]
    spent = status["spent_today_usd"]
    overshoot = spent - budget
    print(json.dumps({"budget": budget, "spent": spent, "per_call": per_call,
                      "calls": calls(provider), "passed": len(passed), "parked": parked,
                      "overshoot_calls": overshoot / per_call,
                      "overshoot_errors": overshoot / error}))  # fmt: skip
    assert spent == pytest.approx(sum(costs)) and calls(provider) == len(passed)
    assert spent >= budget and parked > 0 and status["exceeded"] == "daily"
    assert overshoot <= IN_FLIGHT * error + 1e-12
