"""Every alert and dashboard expression is valid PromQL and reads only metrics that a
running `saga worker` and `saga controller` export on /metrics (real processes, a real
server, sagas that commit, pay for an LLM call, retry and dead-letter)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import promql_parser
import pytest
from prometheus_client.parser import text_string_to_metric_families

from saga.api.client import SagaClient
from saga.config.settings import Settings
from saga.state.keys import Keys
from tests.controller.support import Procs
from tests.deploy.promql import chart_expressions, grouped_by, metric_names
from tests.executor import pipelines
from tests.executor.support import states, wait_until, worker_base_env

pytestmark = pytest.mark.anyio


def test_every_expression_parses() -> None:
    """Each alert and panel expression is valid PromQL and selects at least one metric."""
    exprs = chart_expressions()
    assert sum(k.startswith("alert ") for k in exprs) == 8
    assert sum(k.startswith("panel ") for k in exprs) >= 15
    for where, expr in exprs.items():
        assert metric_names(expr), where


def test_a_step_is_never_summed_over_saga_types() -> None:
    """Types may share step names (docs/sagas.md): every aggregation that keeps `step`, or
    a saga's outcome, keeps `saga_type` too, so two types' `router` are two series."""
    for where, expr in chart_expressions().items():
        for labels in grouped_by(expr):
            if labels & {"step", "outcome"}:
                assert "saga_type" in labels, (where, expr)
    assert grouped_by("max by (step) (saga_stream_lag)") == [{"step"}]  # the check sees it


def test_the_parser_refuses_broken_promql() -> None:
    """The check is real: an unbalanced expression is refused by the parser."""
    with pytest.raises(Exception, match=r"(?i)unclosed|unexpected|invalid"):
        promql_parser.parse("sum(rate(saga_steps_committed_total[5m])")


def sample_names(text: str) -> set[str]:
    return {s.name for f in text_string_to_metric_families(text) for s in f.samples}


async def scrape(port: int) -> str:
    async with httpx.AsyncClient() as http:
        return (await http.get(f"http://127.0.0.1:{port}/metrics")).text


async def test_every_metric_the_chart_reads_is_exported(
    redis: Any, redis_url: str, keys: Keys, tmp_path: Path
) -> None:
    """The union of a worker's and the controller's /metrics names every metric of every
    alert and panel."""
    env = worker_base_env(redis_url, keys, tmp_path / "data")
    env.update(SAGA_LLM_MOCK_RESPONSE='{"ok": true}', SAGA_METRICS_BY_USER="1")
    procs = Procs(tmp_path)
    rids = ["llm-0-cost", "perm-dead", "once-retry"]
    try:
        worker, controller = procs.worker(env), procs.controller(env)
        await worker.wait_ready(within=90)
        await controller.wait_ready(within=90)
        sagas = SagaClient(redis, keys, pipelines.pipeline(), Settings())
        for rid in rids:
            await sagas.start(rid, "user-1")

        async def ended() -> bool:
            return await states(redis, keys, rids) == ["completed", "failed", "completed"]

        await wait_until(ended, within=60, what="the sagas to end", on_timeout=procs.tails)

        async def all_series() -> bool:
            names = sample_names(await scrape(worker.port)) | sample_names(
                await scrape(controller.port)
            )
            return "saga_llm_cost_usd_total" in names and "saga_oldest_ready_age_seconds" in names

        await wait_until(all_series, within=30, what="every series on /metrics")
        worker_text, controller_text = await scrape(worker.port), await scrape(controller.port)
        exported = sample_names(worker_text) | sample_names(controller_text)
    finally:
        procs.kill_all()
    # Every series of a step names its type; the document pipeline's keeps "documents".
    for text in (worker_text, controller_text):
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if "step" in sample.labels:
                    assert sample.labels.get("saga_type") == "documents", sample
    missing = {
        where: sorted(metric_names(expr) - exported)
        for where, expr in chart_expressions().items()
        if metric_names(expr) - exported
    }
    assert missing == {}
