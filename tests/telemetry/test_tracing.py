"""One trace per saga: the start's span is the parent of every attempt, in any worker."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from structlog.testing import capture_logs

from saga.adapters.billing import BillingClient
from saga.adapters.llm import CostMeter, LiteLLMClient, LLMConfig
from saga.state import reads
from saga.state.keys import Keys
from saga.state.model import Claim
from saga.telemetry import tracing
from saga.telemetry.redact import redact
from saga.telemetry.scope import merge_scope
from saga.worker.ports import AttemptPorts, NoDocuments

from .support import KEY, PAGE, client, executors, wait_until

pytestmark = pytest.mark.anyio


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """Tracing on, every span kept in memory; off again after the test."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.use_provider(provider)
    yield exporter
    tracing.disable_tracing()
    provider.shutdown()


class LLMPorts:
    """Each attempt gets a LiteLLM client (mock answers) keyed through a billing service."""

    documents = NoDocuments()

    def __init__(self, redis: Any, keys: Keys) -> None:
        reply = httpx.Response(200, json={"key": KEY})
        self.redis, self.keys = redis, keys
        self.billing = BillingClient(
            "http://billing.test", redis, keys, None, transport=httpx.MockTransport(lambda r: reply)
        )

    def for_attempt(self, claim: Claim) -> AttemptPorts:
        meter = CostMeter()
        llm = LiteLLMClient(
            LLMConfig(model="openai/gpt-4o-mini", extra={"mock_response": '{"rows": []}'}),
            redis=self.redis,
            keys=self.keys,
            record_id=claim.record_id,
            step=claim.step,
            api_key=self.billing.for_user(claim.user_id),
            meter=meter,
        )
        return AttemptPorts(llm, lambda: (meter.total, meter.prompt_tokens))

    async def aclose(self) -> None:
        await self.billing.aclose()


def by_name(finished: tuple[ReadableSpan, ...]) -> dict[str, list[ReadableSpan]]:
    found: dict[str, list[ReadableSpan]] = {}
    for s in finished:
        found.setdefault(s.name, []).append(s)
    return found


async def test_two_steps_in_two_workers_share_the_saga_trace(
    redis: Any, keys: Keys, spans: InMemorySpanExporter
) -> None:
    """saga → process extract (worker a) → llm → billing, saga → process count (worker b):
    one trace id, parents as drawn in tracing.py, messaging and saga attributes."""
    ports = LLMPorts(redis, keys)
    processors = [merge_scope, redact]
    with capture_logs(processors=processors) as events:
        async with executors(redis, keys, {"w-a": ["extract"], "w-b": ["count"]}, ports=ports):
            await client(redis, keys).start("rec-t", "user-7", document="fine")
            (saga,) = await wait_until(redis, keys, ["rec-t"], within=60)  # litellm loads
    await ports.aclose()
    assert saga.state == "completed"
    named = by_name(spans.get_finished_spans())
    (root,) = named["saga rec-t"]
    (first,) = named["process extract"]
    (second,) = named["process count"]
    (llm,) = named["llm extract"]
    (billing,) = named["billing key"]
    assert root.parent is None and root.kind == SpanKind.PRODUCER
    tid = root.context.trace_id
    assert {s.context.trace_id for s in (first, second, llm, billing)} == {tid}
    assert saga.trace.startswith(f"00-{tid:032x}-{root.context.span_id:016x}-")
    for span, step, worker in ((first, "extract", "w-a"), (second, "count", "w-b")):
        assert span.kind == SpanKind.CONSUMER
        assert span.parent is not None and span.parent.span_id == root.context.span_id
        a = span.attributes or {}
        assert a["messaging.system"] == "redis"
        assert a["messaging.destination.name"] == keys.ready(0, step)
        assert re.fullmatch(r"\d+-\d+", str(a["messaging.message.id"]))
        assert (a["saga.record_id"], a["saga.user_id"], a["saga.worker"]) == (
            "rec-t",
            "user-7",
            worker,
        )
        assert (a["saga.attempt"], a["saga.epoch"], a["saga.outcome"]) == (1, 1, "committed")
    assert llm.parent is not None and llm.parent.span_id == first.context.span_id
    assert billing.parent is not None and billing.parent.span_id == llm.context.span_id
    la = llm.attributes or {}
    assert la["gen_ai.request.model"] == "openai/gpt-4o-mini"
    assert la["saga.llm.cached"] is False and la["gen_ai.usage.input_tokens"] >= 0
    assert "saga.llm.cost_usd" in la
    everything = json.dumps([dict(s.attributes or {}) for s in spans.get_finished_spans()])
    assert KEY not in everything and "Jane Roe" not in everything and PAGE not in everything
    claimed = [e for e in events if e["event"] == "step_claimed"]
    ids = {e["step"]: (e["trace_id"], e["span_id"]) for e in claimed}
    assert ids == {
        "extract": (f"{tid:032x}", f"{first.context.span_id:016x}"),
        "count": (f"{tid:032x}", f"{second.context.span_id:016x}"),
    }


async def test_failed_attempts_are_error_spans_with_the_type_only(
    redis: Any, keys: Keys, spans: InMemorySpanExporter
) -> None:
    """A retried then dead-lettered step: two error spans (retry, dead), error.type only."""
    async with executors(redis, keys, {"w-a": ["extract", "count"]}):
        await client(redis, keys).start("rec-f", "user-7", document="broken")
        await wait_until(redis, keys, ["rec-f"])
    attempts = by_name(spans.get_finished_spans())["process extract"]
    assert [(s.attributes or {})["saga.attempt"] for s in attempts] == [1, 2]
    assert [(s.attributes or {})["saga.outcome"] for s in attempts] == ["retry", "dead"]
    for s in attempts:
        assert s.status.status_code == StatusCode.ERROR and not s.status.description
        assert (s.attributes or {})["error.type"] == "ValueError"
        assert not s.events  # no exception event: its message could hold page text


async def test_a_saga_started_inside_an_api_request_joins_its_trace(redis: Any, keys: Keys) -> None:
    """With saga tracing off, the caller's current span is stored; with it on, the saga
    span is a child of the caller's span."""
    api = TracerProvider()
    api_spans = InMemorySpanExporter()
    api.add_span_processor(SimpleSpanProcessor(api_spans))
    with api.get_tracer("api").start_as_current_span("POST /records") as request:
        await client(redis, keys).start("rec-api", "user-1")
        ctx = request.get_span_context()
    saga = await reads.get_saga(redis, keys, "rec-api")
    assert saga.trace.startswith(f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-")

    tracing.use_provider(api)
    try:
        with api.get_tracer("api").start_as_current_span("POST /records") as request:
            await client(redis, keys).start("rec-api-2", "user-1")
    finally:
        tracing.disable_tracing()
    (root,) = [s for s in api_spans.get_finished_spans() if s.name == "saga rec-api-2"]
    assert root.parent is not None
    assert root.parent.span_id == request.get_span_context().span_id
    assert trace.get_current_span().get_span_context().is_valid is False


async def test_with_tracing_off_no_span_is_made_but_logs_still_share_a_trace_id(
    redis: Any, keys: Keys
) -> None:
    """No endpoint, no provider: attempts make no spans, but the saga stores a made-up
    traceparent so its log lines in every process carry one trace_id."""
    assert not tracing.enabled()
    assert tracing.configure_tracing("", "saga-test")() is None
    assert not tracing.enabled()
    async with executors(redis, keys, {"w-a": ["extract", "count"]}):
        await client(redis, keys).start("rec-off", "user-1")
        (saga,) = await wait_until(redis, keys, ["rec-off"])
    assert saga.state == "completed"
    assert len(tracing.trace_id_of(saga.trace)) == 32
    assert tracing.attempt_span(_claim(), keys, "w") is tracing.NO_SPAN
    assert tracing.child_span("llm x", {}) is tracing.NO_SPAN


def _claim() -> Claim:
    return Claim(
        record_id="r",
        user_id="u",
        step="extract",
        entry_id="1-0",
        attempt=1,
        epoch=1,
        token="t",
        lease_until_ms=0,
        input=b"{}",
        document="",
        trace="",
        created_ms=0,
    )
