"""Adding a step takes a function, a registration and a deployment: an ``enricher``
published under the ``saga.steps`` entry-point group by a separately installed
distribution runs between the document parser and grouper, with no engine change."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from saga.api.client import SagaClient
from saga.api.pipeline import with_registrations
from saga.config.settings import Settings
from saga.state.keys import Keys
from saga.state.model import EventType
from saga.wiring.runtime import document_pipeline
from tests.executor import pipelines
from tests.executor.conftest import SpawnWorker
from tests.executor.support import (
    REPO,
    assert_one_commit_per_step,
    saga_and_history,
    states,
    wait_until,
)

pytestmark = pytest.mark.anyio

SAMPLES = ("annual_panel", "followup_mixed", "thyroid_pipe", "wellness_colon")
FOUR = ("router", "parser", "enricher", "grouper")


def install_enricher(site: Path) -> Path:
    """A distribution's metadata on a path entry: what ``pip install`` of a package
    declaring ``[project.entry-points."saga.steps"]`` would leave behind."""
    info = site / "saga_enricher_example-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: saga-enricher-example\nVersion: 0.1\n"
    )
    (info / "entry_points.txt").write_text(
        "[saga.steps]\nenricher = tests.executor.pipelines:enricher_registration\n"
    )
    return site


async def test_enricher_from_an_entry_point_runs_between_parser_and_grouper(
    spawn: SpawnWorker, base_env: dict[str, str], redis: Any, keys: Keys, tmp_path: Path
) -> None:
    """Four sample documents go router → parser → enricher → grouper, one commit each."""
    site = install_enricher(tmp_path / "site")
    env = {k: v for k, v in base_env.items() if k != "SAGA_PIPELINE"}  # the document pipeline
    env["PYTHONPATH"] = f"{site}:{REPO}"
    document_workers = spawn("router", "parser", "grouper", env=env)
    enricher_worker = spawn("enricher", env=env)  # its own deployment
    await document_workers.wait_ready()
    await enricher_worker.wait_ready()

    settings = Settings()
    pipe = with_registrations(document_pipeline(settings), [pipelines.enricher_registration])
    assert pipe.names == FOUR
    sagas = SagaClient(redis, keys, pipe, settings)
    samples = REPO / "saga" / "samples"
    for name in SAMPLES:
        await sagas.start(f"doc-{name}", "u1", document=str(samples / f"{name}.pdf"))
    rids = [f"doc-{name}" for name in SAMPLES]

    async def done() -> bool:
        return all(s in ("completed", "failed") for s in await states(redis, keys, rids))

    await wait_until(done, within=60, what="the four sagas to finish", every=0.05)
    for rid in rids:
        saga, events = await saga_and_history(redis, keys, rid)
        assert_one_commit_per_step(saga, events, FOUR)
        order = [e.step for e in events if e.event == EventType.COMMITTED]
        assert order == list(FOUR)
        enriched = [e for e in events if e.event == EventType.COMMITTED and e.step == "enricher"]
        assert enricher_worker.owns(enriched[0].worker)
        parsed = json.loads(saga.outputs["parser"])
        enricher_out = json.loads(saga.outputs["enricher"])
        assert enricher_out["biomarker_count"] == parsed["biomarker_count"] + 1
        groups = json.loads(saga.outputs["grouper"])["groups"]
        members = [m for g in groups for m in g["members"]]
        assert pipelines.ENRICHER_MARKER in members  # the grouper read the enricher's output
