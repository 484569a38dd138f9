"""The review gate before publish (SAGA_REVIEW_BEFORE_PUBLISH=1) with real workers and a
real results endpoint: a clean report is published at once; a flagged one waits at the
gate, publishing nothing, until `saga review accept`, and is then published once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from saga.state.keys import Keys
from saga.state.reads import get_saga
from tests.executor.conftest import SpawnWorker
from tests.executor.support import wait_until
from tests.executor.test_documents_e2e import PIPELINE, saga_cli
from tests.executor.test_publish import ResultsServer, results  # noqa: F401 - the fixture
from tests.steps.pdfgen import make_pdf

pytestmark = pytest.mark.anyio


async def test_a_flagged_report_is_published_only_after_its_review(
    spawn: SpawnWorker, keys: Keys, redis_url: str, redis: Any, tmp_path: Path,
    results: ResultsServer,  # noqa: F811
) -> None:  # fmt: skip
    env = {"SAGA_RESULTS_URL": results.url, "SAGA_REVIEW_BEFORE_PUBLISH": "1",
           "SAGA_DOCUMENT_ROOTS": str(tmp_path), **PIPELINE}  # fmt: skip
    (tmp_path / "clean.pdf").write_bytes(make_pdf([["HbA1c  6.1  %  4.0 - 5.6"]]))
    (tmp_path / "odd.pdf").write_bytes(
        make_pdf([["HbA1c  6.1  %  4.0 - 5.6", "Sodium  1400  mmol/L  135 - 145"]])
    )
    spawn("router", "parser", "grouper", "review", "publish", **env)
    clean = saga_cli(keys, redis_url, "start", "r1", "u1", "--document",
                     str(tmp_path / "clean.pdf"), "--wait", **env)  # fmt: skip
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert results.calls() == [("POST", "/results", "r1:publish:e1")]

    started = saga_cli(keys, redis_url, "start", "r2", "u1", "--document",
                       str(tmp_path / "odd.pdf"), **env)  # fmt: skip
    assert started.returncode == 0, started.stderr

    async def at_gate() -> bool:
        s = await get_saga(redis, keys, "r2")
        return (s.state, s.step) == ("waiting", "review")

    await wait_until(at_gate, within=60, what="r2 to wait at the gate", every=0.05)
    assert [c for c in results.calls() if "r2" in c[2]] == []
    shown = saga_cli(keys, redis_url, "show", "r2", **env)
    assert shown.returncode == 0, shown.stderr
    assert "waiting for review" in shown.stdout, shown.stdout

    accepted = saga_cli(keys, redis_url, "review", "accept", "r2", **env)
    assert accepted.returncode == 0, accepted.stdout + accepted.stderr
    assert "it leaves the review gate for step publish" in accepted.stdout, accepted.stdout

    async def completed() -> bool:
        return (await get_saga(redis, keys, "r2")).state == "completed"

    await wait_until(completed, within=60, what="r2 to be published", every=0.05)
    assert [c for c in results.calls() if "r2" in c[2]] == [("POST", "/results", "r2:publish:e1")]
    body = next(b for _, _, k, b in results.received if k == "r2:publish:e1")
    assert body["group_count"] >= 1  # the gate passed the grouper's output on
