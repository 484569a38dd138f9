"""The chart's alerts and dashboard keep working while the previous release's workers run
beside this one's: every metric an expression selects, and every label it aggregates
by, is exported by both releases' real ``saga worker`` and ``saga controller`` (or, for
a metric renamed since, recorded under the new name by the chart's upgrade recording
rules: ``metrics.prometheusRule.upgradeRules``)."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from saga.api.client import SagaClient
from saga.config.settings import Settings
from saga.state.connection import connect
from saga.state.keys import Keys
from tests.deploy.promql import chart_expressions, grouped_by, metric_names, upgrade_rules
from tests.deploy.test_alert_metrics import scrape
from tests.executor import pipelines
from tests.executor.support import Worker, states, wait_until, worker_base_env
from tests.upgrade import release_procs
from tests.upgrade.release_venv import Release

pytestmark = pytest.mark.anyio

TARGET_LABELS = {"namespace", "pod", "job", "instance", "service", "container", "endpoint"}
"""Attached by Prometheus to every scraped series, not exported by saga."""

Exported = dict[str, set[str]]
"""Metric (sample) name -> the labels its series carry."""


def exported(text: str) -> Exported:
    found: Exported = defaultdict(set)
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[sample.name] |= set(sample.labels)
    return found


def with_recorded(names: Exported, rules: dict[str, str]) -> Exported:
    """``names`` and what the upgrade recording rules record from them (a rule whose
    metrics are all exported records its name, with their labels)."""
    out: Exported = defaultdict(set, {k: set(v) for k, v in names.items()})
    for record, expr in rules.items():
        metrics = metric_names(expr)
        if metrics and metrics <= set(names):
            out[record] |= set().union(*(names[m] for m in metrics))
    return out


def unreadable(names: Exported) -> dict[str, list[str]]:
    """Where -> what an expression reads that ``names`` lacks (a metric, or a label)."""
    out = {}
    for where, expr in chart_expressions().items():
        metrics = metric_names(expr)
        labels = set().union(*(names.get(m, set()) for m in metrics))
        by = set().union(*grouped_by(expr)) - TARGET_LABELS
        gaps = sorted(metrics - set(names)) + sorted(f"label {b}" for b in by - labels)
        if gaps:
            out[where] = gaps
    return out


async def scraped(release: Release | None, url: str, keys: Keys, tmp: Path) -> Exported:
    """The union of a worker's and a controller's /metrics of ``release`` after sagas that
    commit, pay for an LLM answer, retry and dead-letter."""
    env = worker_base_env(url, keys, tmp / "data")
    env.update(SAGA_LLM_MOCK_RESPONSE='{"ok": true}', SAGA_METRICS_BY_USER="1")
    tag = release.commit[:7] if release else "current"
    procs: list[Worker] = []
    client = connect(url)
    try:
        for command in (["worker", *pipelines.STEPS], ["controller"]):
            log = tmp / f"{command[0]}-{tag}.log"
            procs.append(release_procs.start(release, command, env, log))
        for p in procs:
            await p.wait_ready(within=120)
        sagas = SagaClient(client, keys, pipelines.pipeline(), Settings())
        rids = ["llm-0-cost", "perm-dead", "once-retry"]
        for rid in rids:
            await sagas.start(rid, "user-1")

        async def ended() -> bool:
            return await states(client, keys, rids) == ["completed", "failed", "completed"]

        tails = lambda: "\n".join(p.tail() for p in procs)  # noqa: E731
        await wait_until(ended, within=90, what=f"{tag}'s sagas to end", on_timeout=tails)
        box: list[Exported] = []

        async def every_series() -> bool:
            found: Exported = defaultdict(set)
            for p in procs:
                for name, labels in exported(await scrape(p.port)).items():
                    found[name] |= labels
            box[:] = [found]
            return "saga_llm_cost_usd_total" in found and "saga_oldest_ready_age_seconds" in found

        await wait_until(every_series, within=30, what=f"{tag}'s series", on_timeout=tails)
        return box[0]
    finally:
        for p in procs:
            p.kill()
        await client.aclose()


async def test_the_chart_reads_both_releases_metrics(
    previous_release: Release, redis_url: str, tmp_path: Path
) -> None:
    """Each alert and panel finds its metrics and its `by` labels in the previous
    release's exports and in this one's."""
    old = await scraped(previous_release, redis_url, Keys(prefix="old", partitions=1), tmp_path)
    new = await scraped(None, redis_url, Keys(prefix="new", partitions=1), tmp_path)
    assert unreadable(new) == {}
    rules = upgrade_rules()  # this release's, from values.yaml (none: nothing renamed)
    assert unreadable(with_recorded(old, rules)) == {}, (
        "the previous release's workers would drop out of these: add an upgrade rule"
    )


def test_the_check_sees_a_renamed_metric_and_label() -> None:
    """The check is real: an export without a metric, or without a label an expression
    groups by, is reported where the chart reads it."""
    full: Exported = defaultdict(set)
    for expr in chart_expressions().values():
        for m in metric_names(expr):
            full[m] |= set().union(*grouped_by(expr), {"le"}) - TARGET_LABELS
    assert unreadable(full) == {}
    renamed: Any = {k: v for k, v in full.items() if k != "saga_stream_lag"}
    assert any("saga_stream_lag" in gaps for gaps in unreadable(renamed).values())
    relabelled = {k: v - {"step"} for k, v in full.items()}
    assert any("label step" in gaps for gaps in unreadable(relabelled).values())
    # The rename's upgrade rule, rendered by the chart, records the new name again.
    renamed["saga_stream_lag_entries"] = full["saga_stream_lag"]
    values = {"metrics": {"prometheusRule": {"upgradeRules": [
        {"record": "saga_stream_lag", "expr": "saga_stream_lag_entries"}]}}}  # fmt: skip
    assert unreadable(with_recorded(renamed, upgrade_rules(values))) == {}
