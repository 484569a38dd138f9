"""A real ``saga worker router`` OCR-ing a 10-page 200 dpi scan on one core: its
``/readyz`` and ``/livez`` answer throughout, each in under a second, and the router
step commits within the router's default timeout.

Real Tesseract (skipped, with the reason, where it is not installed)."""

from __future__ import annotations

import dataclasses
import os
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import anyio
import pytest

from saga.api.pipeline import StepSpec
from saga.state.keys import Keys
from saga.state.model import SagaState
from saga.state.reads import get_saga
from tests.cli.inspect_support import env_for
from tests.corpus import layouts_us
from tests.corpus.scanner import SCAN_200, image_pdf, render, spoil
from tests.executor.conftest import SpawnWorker
from tests.executor.support import REPO
from tests.ocr_marks import needs_tesseract

pytestmark = [
    pytest.mark.anyio,
    needs_tesseract("eng+deu+fra"),
]

PAGES = 10
ANSWER_S = 1.0
"""The slowest a health answer may be (a kubelet probe's default timeout is 1 s)."""


def _probe(port: int, path: str) -> tuple[int, float]:
    """Status and seconds of one GET; a slow answer is waited for (5 s) and measured."""
    started = time.monotonic()
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as reply:
            code = int(reply.status)
    except urllib.error.HTTPError as exc:
        code = exc.code
    except OSError:
        code = 0
    return code, time.monotonic() - started


def _ten_page_scan(path: Path) -> None:
    pdf, _ = layouts_us.quest_style()
    pages = render(pdf, SCAN_200)
    pictures = [spoil(pages[i % len(pages)], SCAN_200, seed=60 + i) for i in range(PAGES)]
    path.write_bytes(image_pdf(pictures, SCAN_200))


async def test_the_router_answers_its_probes_while_ocr_reads_ten_pages_on_one_core(
    spawn: SpawnWorker, keys: Keys, redis_url: str, redis: Any, tmp_path: Path
) -> None:
    """Probes every 0.1 s from start to commit: every one 200 in under 1 s; the router
    commits (the saga moves on to the parser) within the default step timeout."""
    if not hasattr(os, "sched_setaffinity"):
        pytest.skip("CPU affinity is Linux only")
    scan = tmp_path / "docs" / "scan.pdf"
    scan.parent.mkdir()
    _ten_page_scan(scan)
    timeout = float(next(f.default for f in dataclasses.fields(StepSpec) if f.name == "timeout_s"))  # type: ignore[arg-type]
    worker = spawn(
        "router",
        SAGA_PIPELINE="",  # the document pipeline: the real router
        SAGA_OCR="on",
        SAGA_DOCUMENT_ROOTS=str(scan.parent),
    )
    # one core for the worker and everything it starts after this (extraction, tesseract)
    os.sched_setaffinity(worker.pid, {min(os.sched_getaffinity(0))})
    await worker.wait_ready()
    command = [sys.executable, "-m", "saga.cli.main", "start", "scan1", "u1", "--document"]
    started = await anyio.run_process(
        [*command, str(scan)],
        cwd=REPO,
        env={**env_for(keys, redis_url), "PYTHONPATH": str(REPO)},
        check=False,
    )
    assert started.returncode == 0, (started.stdout + started.stderr).decode()
    answers: list[tuple[str, int, float]] = []
    begun = time.monotonic()
    with anyio.fail_after(timeout + 30):
        while True:
            for path in ("/readyz", "/livez"):
                code, took = await anyio.to_thread.run_sync(_probe, worker.port, path)
                answers.append((path, code, took))
            saga = await get_saga(redis, keys, "scan1")
            if saga.step != "router" or saga.state is SagaState.FAILED:
                break
            assert worker.alive(), worker.tail()
            await anyio.sleep(0.1)
    elapsed = time.monotonic() - begun
    assert saga.state is not SagaState.FAILED, saga.error_message
    assert saga.step == "parser", (saga.state, saga.step)
    assert elapsed < timeout, f"the router took {elapsed:.0f} s, over its {timeout:.0f} s timeout"
    bad = [a for a in answers if a[1] != 200 or a[2] >= ANSWER_S]
    assert len(answers) > 20, "too few probes to say anything"
    assert not bad, f"{len(bad)} of {len(answers)} probes failed or were slow: {bad[:5]}"
    [routed] = worker.logged("document routed")
    assert routed["ocr_pages"] == PAGES
    slowest = max(a[2] for a in answers)
    print(
        f"{PAGES} pages, {elapsed:.1f} s, one core; {len(answers)} probes, slowest {slowest:.3f} s"
    )
