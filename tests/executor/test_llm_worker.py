"""Worker processes and the LLM: litellm loads only where a step calls a model, and an
answer paid by a killed worker is counted in the metrics of the worker that bills it."""

from __future__ import annotations

import os
import re
import signal
import uuid
from pathlib import Path
from typing import Any

import anyio
import msgspec
import psutil
import pytest

from saga.api.client import SagaClient
from saga.config.settings import Settings
from saga.state.keys import Keys
from saga.state.model import EventType
from saga.steps.models import ParserOutput
from saga.wiring.runtime import document_pipeline
from tests.adapters.support import Reply, Request, chat_reply, reading_model, serve
from tests.executor.conftest import SpawnWorker
from tests.executor.support import (
    Worker,
    saga_and_history,
    states,
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


async def test_a_worker_loads_litellm_before_ready_only_when_a_model_may_be_called(
    spawn: SpawnWorker, sagas: SagaClient, redis: Any, keys: Keys
) -> None:
    """No model configured: the worker runs its steps without litellm. A model
    configured and a step that may call it: litellm is loaded before the worker reports
    ready (saga.worker.warmup), once, so the first saga waits on no import."""
    lean = spawn("router")
    await lean.wait_ready()
    rid = f"plain-{uuid.uuid4().hex[:8]}"
    await sagas.start(rid, "u1")
    await router_committed(redis, keys, rid)
    lean_mb = rss_mb(lean)
    assert litellm_libraries(lean) == [] and not lean.logged("litellm_loaded")

    caller = spawn("router", SAGA_LLM_API_KEY="sk-test-key", SAGA_LLM_MOCK_RESPONSE='{"ok": 1}')
    await caller.wait_ready()
    assert litellm_libraries(caller) != [], "litellm must be loaded before ready"
    lean.kill()  # the model-calling saga must land on the other worker
    rid = f"llm-0-{uuid.uuid4().hex[:8]}"
    await sagas.start(rid, "u1")
    await router_committed(redis, keys, rid)
    print(f"RSS: router-only {lean_mb:.0f} MB, after an LLM step {rss_mb(caller):.0f} MB")
    assert len(caller.logged("litellm_loaded")) == 1


def metric(text: str, name: str, step: str) -> float | None:
    """The sample of the default type's ``step`` (every step series names its type)."""
    labels = f'saga_type="documents",step="{step}"'
    found = re.search(rf"^{name}\{{{labels}\}} (\S+)$", text, re.MULTILINE)
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
    survivor = b if victim is a else a
    pattern = keys.llm_cache(rid, "router", "x").rsplit(":", 1)[0] + ":*"

    async def answered() -> bool:
        return bool([k async for k in redis.scan_iter(match=pattern)])

    await wait_until(answered, within=90, what="the LLM answer to be cached")  # litellm loads
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


async def test_a_retry_asks_the_fixed_model_again(
    spawn: SpawnWorker, base_env: dict[str, str], redis: Any, keys: Keys, tmp_path: Path
) -> None:
    """The model answers garbage: the parser dead-letters. The model is fixed, and
    `saga retry --step parser` (a new epoch) calls it again instead of replaying the
    cached garbage; the saga completes with the value grounded on its line."""
    document = tmp_path / "report.txt"
    document.write_text("Lab report\nGlucose  95 mg/dL  70 - 99\n")
    fixed = False

    def model(request: Request) -> Reply:
        return reading_model(request) if fixed else chat_reply("I cannot read this.")

    with serve(model) as stub:
        env = {k: v for k, v in base_env.items() if k != "SAGA_PIPELINE"}  # the document pipeline
        env.update(SAGA_PARSER="llm", SAGA_LLM_API_BASE=f"{stub.url}/v1",
                   SAGA_LLM_API_KEY="sk-test-key",
                   SAGA_DOCUMENT_ROOTS=str(tmp_path))  # fmt: skip
        worker = spawn("router", "parser", "grouper", env=env)
        await worker.wait_ready()
        sagas = SagaClient(redis, keys, document_pipeline(Settings()), Settings())
        rid = f"doc-{uuid.uuid4().hex[:8]}"
        await sagas.start(rid, "u1", document=str(document))

        async def ended() -> bool:
            return (await states(redis, keys, [rid]))[0] in ("completed", "failed")

        await wait_until(ended, within=90, what="the saga to dead-letter at the parser")
        saga, _ = await saga_and_history(redis, keys, rid)
        assert (saga.state, saga.step, saga.error_class) == ("failed", "parser", "PermanentError")
        assert len(stub.requests) == 2  # the request and its repair
        fixed = True
        retried = await sagas.retry(rid, step="parser")
        assert (retried.epoch, retried.step) == (2, "parser")
        await wait_until(ended, within=60, what="the retried saga to end")
    saga, _ = await saga_and_history(redis, keys, rid)
    assert saga.state == "completed", saga.error_message
    assert len(stub.requests) == 3
    output = msgspec.json.decode(saga.outputs["parser"], type=ParserOutput)
    [glucose] = output.extraction.biomarkers
    assert glucose.value == 95 and glucose.provenance is not None
    assert glucose.provenance.line == "Glucose  95 mg/dL  70 - 99"
