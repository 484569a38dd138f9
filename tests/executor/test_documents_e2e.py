"""Documents through the real entry points: ``saga start`` in one directory, a ``saga worker``
process in another; the fetch policy and the extraction limits as a deployment sees them."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from saga.state.keys import Keys
from saga.state.model import SagaState
from saga.state.reads import get_saga
from tests.cli.inspect_support import env_for
from tests.executor.conftest import SpawnWorker
from tests.executor.support import REPO, wait_until
from tests.steps.conftest import LocalServer
from tests.steps.odd_pdfs import shared_stream_pdf
from tests.steps.pdfgen import make_pdf

pytestmark = pytest.mark.anyio

RECORDS = "https://records.internal/api/records/{record_id}/document"
PIPELINE = {"SAGA_PIPELINE": ""}  # the document pipeline (router -> parser -> grouper)


def saga_cli(
    keys: Keys, redis_url: str, *args: str, cwd: Path = REPO, **env: str
) -> subprocess.CompletedProcess[str]:
    """``saga <args>`` as a person runs it: in ``cwd``, against the test's server."""
    return subprocess.run(
        [sys.executable, "-m", "saga.cli.main", *args],
        cwd=cwd,
        env={**env_for(keys, redis_url, **env), "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture
def internal_service() -> Iterator[LocalServer]:
    """A real HTTP service on loopback, standing for Redis or a metadata endpoint."""
    server = LocalServer()
    server.start()
    yield server
    server.stop()


async def test_a_http_only_deployment_refuses_local_files_and_internal_urls(
    spawn: SpawnWorker, keys: Keys, redis_url: str, tmp_path: Path, internal_service: LocalServer
) -> None:
    """With SAGA_DOCUMENT_SOURCE on https, ``--document /etc/passwd``, a 0600 file:// URL and
    a loopback URL dead-letter at the router with PolicyError; nothing internal is contacted."""
    secret = tmp_path / "secret.txt"
    secret.write_text("Sodium 140 mmol/L 135-145")
    secret.chmod(0o600)
    worker = spawn("router", SAGA_DOCUMENT_SOURCE=RECORDS, **PIPELINE)
    await worker.wait_ready()
    refs = ["/etc/passwd", secret.as_uri(), internal_service.url("/")]
    for n, ref in enumerate(refs):
        res = saga_cli(keys, redis_url, "start", f"f{n}", "u1", "--document", ref, "--wait")
        assert res.returncode == 1, res.stdout + res.stderr
        assert "PolicyError" in res.stdout, res.stdout
    assert internal_service.requests == []
    assert "Sodium" not in worker.log.read_text()


async def test_a_relative_document_is_read_by_a_worker_elsewhere(
    spawn: SpawnWorker, keys: Keys, redis_url: str, redis: Any, tmp_path: Path
) -> None:
    """``saga start … --document report.pdf`` in the caller's directory completes with a
    worker that runs in another directory (the path is made absolute at start)."""
    caller = tmp_path / "caller"
    caller.mkdir()
    (caller / "report.pdf").write_bytes(make_pdf([["Ferritin  80  ng/mL  15 - 150"]]))
    worker = spawn(SAGA_DOCUMENT_ROOTS=str(caller), **PIPELINE)
    await worker.wait_ready()
    res = saga_cli(keys, redis_url, "start", "r1", "u1", "--document", "report.pdf", "--wait",
                   cwd=caller)  # fmt: skip
    assert res.returncode == 0, res.stdout + res.stderr
    saga = await get_saga(redis, keys, "r1")
    assert saga.document == str(caller / "report.pdf") and saga.state == SagaState.COMPLETED


UNLIMITED = {"SAGA_MAX_PAGE_CONTENT_BYTES": str(10**12), "SAGA_MAX_CONTENT_BYTES": str(10**12)}


@pytest.mark.parametrize(
    ("limits", "error"),
    [
        pytest.param(UNLIMITED, "ran past its timeout of 5s", id="timeout"),
        pytest.param({}, "decompressed content of pages 1-34", id="content-limit"),
        pytest.param(
            {"SAGA_MAX_PAGES": "100"}, "page count is 200, over the limit of 100", id="page-limit"
        ),
        # the bomb is ~36 KB on disk (its one stream compresses well)
        pytest.param(
            {"SAGA_MAX_DOCUMENT_BYTES": "20000"}, "document size in bytes", id="size-limit"
        ),
    ],
)
async def test_a_failed_pdf_step_releases_cpu_and_memory(
    spawn: SpawnWorker,
    keys: Keys,
    redis_url: str,
    redis: Any,
    tmp_path: Path,
    limits: dict[str, str],
    error: str,
) -> None:
    """Issue 17's fault: 200 pages sharing one 1 MB stream, SAGA_ROUTER_TIMEOUT=5. With the
    content limits raised extraction runs until the timeout kills it; with the defaults it
    is refused before extraction, as it is over a lower page count or document size limit.
    Whichever limit fails the step, within a second of the step failing the worker's CPU is
    idle and its memory (with its extraction processes) back where it was."""
    bomb = tmp_path / "bomb.pdf"
    bomb.write_bytes(shared_stream_pdf(pages=200, stream_bytes=1_000_000))
    worker = spawn(
        "router",
        SAGA_ROUTER_TIMEOUT="5",
        SAGA_ROUTER_MAX_ATTEMPTS="1",
        SAGA_DOCUMENT_ROOTS=str(tmp_path),
        **limits,
        **PIPELINE,
    )
    await worker.wait_ready()
    warm = tmp_path / "warm.pdf"  # the baseline includes a warm extraction process
    warm.write_bytes(make_pdf([["Ferritin  80  ng/mL"]]))
    assert saga_cli(keys, redis_url, "start", "warm", "u1", "--document", str(warm)).returncode == 0

    async def routed() -> bool:
        return (await get_saga(redis, keys, "warm")).step == "parser"

    await wait_until(routed, within=60, what="the warm-up document to be routed")
    tree = psutil.Process(worker.pid)
    rss_before = _rss(tree)
    res = saga_cli(keys, redis_url, "start", "bomb", "u1", "--document", str(bomb))
    assert res.returncode == 0, res.stderr

    async def failed() -> bool:
        return (await get_saga(redis, keys, "bomb")).state == SagaState.FAILED

    await wait_until(failed, within=60, what="the router to time out", every=0.05)
    failed_at = time.monotonic()
    assert error in (await get_saga(redis, keys, "bomb")).error_message

    async def released() -> bool:
        # idle, the worker uses ~0.0 cores and its memory is where it was; the old
        # extraction thread kept a core (0.25 under a load of 7) and 34 MB more at once
        return _cpu_share(tree, 0.2) < 0.1 and _rss(tree) < rss_before + 10 * 2**20

    await wait_until(released, within=1.0, what="CPU and memory to be released", every=0.01)
    assert time.monotonic() - failed_at < 1.2  # the last 0.2 s window included


async def test_killing_a_worker_kills_its_extraction(
    spawn: SpawnWorker, keys: Keys, redis_url: str, tmp_path: Path
) -> None:
    """A worker killed with SIGKILL mid-extraction leaves no extraction process burning a
    core: the kernel ends it with its parent."""
    bomb = tmp_path / "bomb.pdf"
    bomb.write_bytes(shared_stream_pdf(pages=200, stream_bytes=1_000_000))
    worker = spawn("router", SAGA_DOCUMENT_ROOTS=str(tmp_path), **UNLIMITED, **PIPELINE)
    await worker.wait_ready()
    assert saga_cli(keys, redis_url, "start", "bomb", "u1", "--document", str(bomb)).returncode == 0
    tree = psutil.Process(worker.pid)
    children: list[psutil.Process] = []

    async def extracting() -> bool:
        children[:] = tree.children(recursive=True)
        return any(p.cpu_percent(0.05) > 20 for p in children)

    await wait_until(extracting, within=30, what="an extraction process to burn CPU")
    worker.kill()

    async def gone() -> bool:
        return not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in children)

    await wait_until(gone, within=1.0, what="the orphaned extraction to end")


def _rss(proc: psutil.Process) -> int:
    total = 0
    for p in [proc, *proc.children(recursive=True)]:
        with contextlib.suppress(psutil.NoSuchProcess):  # killed meanwhile: holds nothing
            total += p.memory_info().rss
    return total


def _cpu_share(proc: psutil.Process, window: float) -> float:
    """Cores the worker and its children used over ``window`` seconds."""
    procs = [proc, *proc.children(recursive=True)]
    before = {p.pid: sum(p.cpu_times()[:2]) for p in procs}
    time.sleep(window)
    used = 0.0
    for p in procs:
        with contextlib.suppress(psutil.NoSuchProcess):  # killed meanwhile: holds nothing
            used += sum(p.cpu_times()[:2]) - before[p.pid]
    return used / window
