"""Worker processes and the LLM: litellm loads only where a step calls a model, and an
answer paid by a killed worker is counted in the metrics of the worker that bills it."""

from __future__ import annotations

import os
import re
import signal
import uuid
from typing import Any

import anyio
import msgspec
import psutil
import pytest

from saga.client import SagaClient
from saga.state.keys import Keys
from saga.state.model import EventType
from tests.executor.conftest import SpawnWorker
from tests.executor.support import (
    Worker,
    saga_and_history,
    wait_claimed,
    wait_completed,
    wait_until,
)

pytestmark = pytest.mark.anyio

LITELLM_ONLY = ("_tiktoken", "_pydantic_core")
"""Extension modules litellm maps into a process and a lean worker never does."""


def litellm_libraries(worker: Worker) -> list[str]:
    """litellm's native libraries mapped into the worker process (read from /proc)."""
    paths = {m.path for m in psutil.Process(worker.pid).memory_maps()}
    return sorted(os.path.basename(p) for p in paths if p.endswith(".so") and
                  os.path.basename(p).startswith(LITELLM_ONLY))  # fmt: skip


def rss_mb(worker: Worker) -> float:
    return psutil.Process(worker.pid).memory_info().rss / 2**20


async def router_committed(redis: Any, keys: Keys, rid: str) -> None:
    async def done() -> bool:
        _, events = await saga_and_history(redis, keys, rid)
        return any(e.event == EventType.COMMITTED and e.step == "router" for e in events)

    await wait_until(done, within=60, what=f"the router step of {rid} to commit")


async def test_a_router_only_worker_with_llm_settings_never_loads_litellm(
    spawn: SpawnWorker, sagas: SagaClient, redis: Any, keys: Keys
) -> None:
    """An API key and a billing URL set: a worker whose steps call no model runs them
    without litellm; one whose step calls the model loads it then, once."""
    llm_env = {"SAGA_LLM_API_KEY": "sk-test-key", "SAGA_BILLING_URL": "http://127.0.0.1:9"}
    lean = spawn("router", **llm_env)
    await lean.wait_ready()
    rid = f"plain-{uuid.uuid4().hex[:8]}"
    await sagas.start(rid, "u1")
    await router_committed(redis, keys, rid)
    lean_mb = rss_mb(lean)
    assert litellm_libraries(lean) == [] and not lean.logged("litellm_loaded")

    caller = spawn("router", SAGA_LLM_API_KEY="sk-test-key", SAGA_LLM_MOCK_RESPONSE='{"ok": 1}')
    await caller.wait_ready()
    assert litellm_libraries(caller) == [], "litellm must not load at start"
    lean.kill()  # the model-calling saga must land on the other worker
    rid = f"llm-0-{uuid.uuid4().hex[:8]}"
    await sagas.start(rid, "u1")
    await router_committed(redis, keys, rid)
    print(f"RSS: router-only {lean_mb:.0f} MB, after an LLM step {rss_mb(caller):.0f} MB")
    assert len(caller.logged("litellm_loaded")) == 1
    assert litellm_libraries(caller) != []


def metric(text: str, name: str, step: str) -> float | None:
    found = re.search(rf'^{name}\{{step="{step}"\}} (\S+)$', text, re.MULTILINE)
    return float(found.group(1)) if found else None


async def scrape(worker: Worker) -> str:
    import urllib.request

    def get() -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{worker.port}/metrics", timeout=5) as r:
            return str(r.read().decode())

    return await anyio.to_thread.run_sync(get)


async def test_cost_of_an_answer_paid_by_a_killed_worker_is_in_the_metrics(
    spawn: SpawnWorker, sagas: SagaClient, redis: Any, keys: Keys
) -> None:
    """kill -9 after the LLM answered: the worker that commits with the cached answer bills
    it, logs it and counts it in saga_llm_cost_usd_total; the total is what was paid."""
    env = {"SAGA_ROUTER_LEASE": "1", "SAGA_LLM_MOCK_RESPONSE": '{"ok": true}'}
    a, b = spawn(**env), spawn(**env)
    await a.wait_ready()
    await b.wait_ready()
    rid = f"llm-3-{uuid.uuid4().hex[:8]}"
    await sagas.start(rid, "u1")
    victim = await wait_claimed(redis, keys, rid, [a, b])
    survivor = b if victim is a else a
    pattern = keys.llm_cache(rid, "router", "x").rsplit(":", 1)[0] + ":*"

    async def answered() -> bool:
        return bool([k async for k in redis.scan_iter(match=pattern)])

    await wait_until(answered, within=30, what="the LLM answer to be cached")
    victim.signal(signal.SIGKILL)
    await wait_completed(redis, keys, rid, within=30)
    [key] = [k async for k in redis.scan_iter(match=pattern)]
    paid = float(msgspec.json.decode(await redis.get(key))["cost"])
    assert paid > 0

    async def counted() -> bool:
        return metric(await scrape(survivor), "saga_llm_cost_usd_total", "router") is not None

    await wait_until(counted, within=10, what="the router's LLM cost on /metrics")
    text = await scrape(survivor)
    assert metric(text, "saga_llm_cost_usd_total", "router") == pytest.approx(paid)
    [committed] = [e for e in survivor.logged("step_committed") if e.get("step") == "router"]
    assert committed["cost_usd"] == pytest.approx(paid)
    saga, _ = await saga_and_history(redis, keys, rid)
    assert saga.costs["router"] == pytest.approx(paid)
