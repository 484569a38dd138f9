"""/metrics over real HTTP after a short run: counters as counted, gauges as `saga top` reads."""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

import anyio
import httpx
import msgspec
import pytest
from prometheus_client.parser import text_string_to_metric_families
from structlog.testing import capture_logs

from saga.api.pipeline import Pipeline
from saga.cli.cmd_top import document, sample
from saga.config.settings import Settings
from saga.state.keys import Keys
from saga.state.queries import queue_stats
from saga.steps.config import StepConfig
from saga.telemetry.metrics import DURATION_BUCKETS_S, Metrics, metric_names
from saga.worker.health import HealthState, serve_health

from .support import PIPELINE, Count, Doc, client, executors, extract, wait_until

pytestmark = pytest.mark.anyio

EXTRACT = frozenset({("saga_type", "documents"), ("step", "extract")})
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def parse(text: str) -> tuple[set[str], Samples]:
    """Family names and every sample, keyed by sample name and labels."""
    families, samples = set(), {}
    for family in text_string_to_metric_families(text):
        families.add(family.name)
        for s in family.samples:
            samples[(s.name, frozenset(s.labels.items()))] = s.value
    return families, samples


def value(samples: Samples, name: str, **labels: str) -> float:
    """One sample; a step's series carry the default type's name unless told otherwise."""
    if "step" in labels:
        labels.setdefault("saga_type", "documents")
    return samples[(name, frozenset(labels.items()))]


async def scrape(port: int, path: str = "/metrics") -> httpx.Response:
    async with httpx.AsyncClient() as http:
        return await http.get(f"http://127.0.0.1:{port}{path}")


class Checked(Count, frozen=True):
    """The extract output, with the review reason a step sets to flag its saga."""

    review: str = ""


async def extract_or_flag(ctx: Any, inp: Doc) -> Checked:
    """`extract`, flagging an "odd" document for a person's review."""
    if inp.document == "odd":
        return Checked(n=(await extract(ctx, Doc("fine"))).n, review="values out of range")
    return Checked(n=(await extract(ctx, inp)).n)


FLAGGING = Pipeline(
    (replace(PIPELINE.steps[0], fn=extract_or_flag, output_type=Checked), PIPELINE.steps[1])
)


async def run_sagas(redis: Any, keys: Keys, metrics: Metrics) -> None:
    """Four sagas stop at `count` (nobody serves it), one of them flagged for review at
    `extract`; one dead-letters at `extract`."""
    observer = metrics.observer
    async with executors(redis, keys, {"w-m": ["extract"]}, observer=observer, pipeline=FLAGGING):
        sagas = client(redis, keys, FLAGGING)
        for i in range(3):
            await sagas.start(f"rec-{i}", "user-1", document="fine")
        await sagas.start("rec-odd", "user-1", document="odd")
        await sagas.start("rec-bad", "user-1", document="broken")
        await wait_until(redis, keys, ["rec-0", "rec-1", "rec-2", "rec-odd"], step="count")
        await wait_until(redis, keys, ["rec-bad"])


async def test_metrics_scraped_over_http_count_the_run_and_agree_with_saga_top(
    redis: Any, keys: Keys
) -> None:
    """Counters by step (a flagged commit counted once), the duration histogram's
    buckets, and gauges equal to queue_stats and to `saga top --once --json`."""
    metrics = Metrics()
    steps = list(PIPELINE.names)
    async with anyio.create_task_group() as tg:
        serve = functools.partial(serve_health, HealthState(), 0, metrics.render, host="127.0.0.1")
        port = await tg.start(serve)
        await run_sagas(redis, keys, metrics)
        await metrics.snapshot.refresh(redis, keys, steps, ["llm"])
        response = await scrape(port)
        tg.cancel_scope.cancel()
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    families, samples = parse(response.text)
    counted = {
        "claimed": 6,  # three fine, the odd one, the broken one twice
        "committed": 4,
        "flagged_for_review": 1,  # the odd one; its commit is counted as committed too
        "failed": 2,
        "retried": 1,
        "dead_lettered": 1,
    }
    for name, n in counted.items():
        assert value(samples, f"saga_steps_{name}_total", step="extract") == n, name
    assert ("saga_steps_fenced_total", EXTRACT) not in samples
    assert ("saga_steps_flagged_for_review_total", frozenset({("step", "count")})) not in samples
    assert value(samples, "saga_step_duration_seconds_count", step="extract") == 6
    buckets = sorted(
        float(dict(k[1])["le"])
        for k in samples
        if k[0] == "saga_step_duration_seconds_bucket" and dict(k[1])["step"] == "extract"
    )
    assert buckets == [*DURATION_BUCKETS_S, float("inf")]
    assert value(samples, "saga_circuit_state", dependency="llm") == 0

    (top,) = [msgspec.to_builtins(document(await sample(redis, keys), None))]  # as printed
    by_step = {s["step"]: s for s in top["steps"]}
    for stats in await queue_stats(redis, keys, steps):
        row = by_step[stats.step]
        for metric, field in (
            ("saga_stream_length", "length"),
            ("saga_stream_lag", "lag"),
            ("saga_stream_pending", "pending"),
            ("saga_dead_letters", "dead"),
            ("saga_retries_waiting", "delayed"),
        ):
            shown = value(samples, metric, step=stats.step)
            assert shown == getattr(stats, field) == row[field], (metric, stats.step)
    assert value(samples, "saga_stream_length", step="count") == 4
    assert value(samples, "saga_stream_lag", step="count") == 4
    assert value(samples, "saga_dead_letters", step="extract") == 1
    # One worker did all the work: its counters equal the totals kept in Redis.
    assert by_step["extract"]["committed"] == 4 and by_step["extract"]["dead_lettered"] == 1
    assert {f for f in families} >= {n.removesuffix("_total") for n in metric_names()} - {
        "saga_steps_fenced",
        "saga_steps_quarantined",
        "saga_steps_left_for_newer_release",
        "saga_steps_parked",
        "saga_llm_cost_usd",
        "saga_llm_tokens",
        "saga_budget_reserved_usd",  # a counter appears with its first hold
    }


def test_llm_cost_is_by_step_and_by_user_only_when_enabled() -> None:
    """Cost and tokens carry a user label only with SAGA_METRICS_BY_USER."""
    plain, per_user = Metrics(), Metrics(by_user=True)
    for m in (plain, per_user):
        m.observer.cost("parser", "user-9", 0.25, 120)
        m.observer.cost("parser", "user-9", 0.5, 30)
    _, samples = parse(plain.render())
    assert value(samples, "saga_llm_cost_usd_total", step="parser") == 0.75
    assert value(samples, "saga_llm_tokens_total", step="parser") == 150
    _, samples = parse(per_user.render())
    assert value(samples, "saga_llm_cost_usd_total", step="parser", user_id="user-9") == 0.75
    assert not any("user_id" in dict(k[1]) for k in parse(plain.render())[1])


def test_metrics_live_in_a_private_registry() -> None:
    """Two Metrics in one process neither clash nor see each other's counts."""
    a, b = Metrics(), Metrics()
    a.observer.committed("router", 0.02)
    _, sa = parse(a.render())
    _, sb = parse(b.render())
    assert value(sa, "saga_steps_committed_total", step="router") == 1
    assert value(sa, "saga_steps_committed_total", step="router", saga_type="documents") == 1
    assert not [k for k in sb if k[0] == "saga_steps_committed_total"]


async def test_every_step_series_carries_its_saga_type(redis: Any, keys: Keys) -> None:
    """A worker's counters, histograms and cost carry its type; a snapshot of two types
    (what the controller reads) labels each gauge with its row's type."""
    m = Metrics(saga_type="orders")
    m.observer.committed("router", 0.02)
    m.observer.error("router", "ValueError")
    m.observer.cost("router", "user-9", 0.25, 10)
    m.observer.saga_ended("completed", 1.0)
    orders = keys.of_type("orders")
    await orders_and_documents(redis, keys, orders)
    await m.snapshot.refresh_types(redis, [(keys, ["router"]), (orders, ["router"])], ["llm"])
    _, samples = parse(m.render())
    assert value(samples, "saga_steps_committed_total", step="router", saga_type="orders") == 1
    assert value(samples, "saga_step_errors_total", step="router", saga_type="orders",
                 error_class="ValueError") == 1  # fmt: skip
    assert value(samples, "saga_llm_cost_usd_total", step="router", saga_type="orders") == 0.25
    assert value(samples, "saga_step_duration_seconds_count", step="router",
                 saga_type="orders") == 1  # fmt: skip
    assert value(samples, "saga_end_to_end_seconds_count", outcome="completed",
                 saga_type="orders") == 1  # fmt: skip
    assert value(samples, "saga_stream_lag", step="router", saga_type="orders") == 2
    assert value(samples, "saga_stream_lag", step="router", saga_type="documents") == 1
    for key in samples:  # every series of a step says which type's
        labels = dict(key[1])
        assert "step" not in labels or labels.get("saga_type") in ("orders", "documents"), key


async def orders_and_documents(redis: Any, keys: Keys, orders: Keys) -> None:
    """Two `router` streams with waiting entries: one in the default type, two in orders."""
    from saga.state.streams import ensure_groups

    for k, n in ((keys, 1), (orders, 2)):
        await ensure_groups(redis, k, ["router"])
        for i in range(n):
            await redis.xadd(k.ready(0, "router"), {"rid": f"r{i}", "ep": "1", "v": "1"})


async def test_the_worker_service_serves_metrics_and_refreshes_gauges(
    redis_url: str, redis: Any, keys: Keys
) -> None:
    """`serve()` wires the metrics observer, /metrics and the gauge refresh loop (with
    every breaker the settings use: an embedding model adds `embedding`)."""
    from saga.worker.service import serve

    settings = Settings(
        redis_url=redis_url,
        key_prefix=keys.prefix,
        block_ms=50,
        promote_interval_s=0.05,
        health_port=0,
        step_config=StepConfig(embedding_model="openai/text-embedding-3-small"),
    )
    ready: list[int] = []
    with capture_logs() as events:
        async with anyio.create_task_group() as tg:
            on_ready = functools.partial(ready.append, 1)
            tg.start_soon(
                functools.partial(
                    serve, settings, ["extract"], pipeline=PIPELINE, on_ready=on_ready
                )
            )
            port = await _port(events)
            await client(redis, keys).start("rec-s", "user-1", document="fine")
            await wait_until(redis, keys, ["rec-s"], step="count")
            with anyio.fail_after(10):
                while True:
                    _, samples = parse((await scrape(port)).text)
                    if samples.get(("saga_steps_committed_total", EXTRACT)):
                        break
                    await anyio.sleep(0.05)
            tg.cancel_scope.cancel()
    assert ("saga_stream_length", EXTRACT) in samples
    assert value(samples, "saga_circuit_state", dependency="llm") == 0
    assert value(samples, "saga_circuit_state", dependency="embedding") == 0
    assert ready == [1]  # once, before the work (the CLI settles the collector there)


async def _port(events: Iterable[dict[str, Any]]) -> int:
    with anyio.fail_after(10):
        while True:
            found = [e["port"] for e in events if e["event"] == "health_listening"]
            if found:
                return int(found[0])
            await anyio.sleep(0.02)
