"""Warm before ready, in a real `saga worker` process of the document pipeline: with a
model configured it imports litellm before /readyz turns 200 while /livez answers
throughout; offline (rules parser, no model) it runs a real PDF to completion without
ever importing litellm. The process writes, at exit, whether litellm was imported."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import anyio
import pytest

from saga.state.keys import Keys
from tests.executor.support import (
    REPO,
    Worker,
    free_port,
    wait_completed,
    wait_until,
    worker_base_env,
)

pytestmark = pytest.mark.anyio

PROBE = """
import atexit, json, sys
out = sys.argv.pop(1)
atexit.register(lambda: open(out, "w").write(json.dumps("litellm" in sys.modules)))
from saga.cli.main import main
sys.exit(main())
"""


def spawn(env: dict[str, str], log: Path, flag: Path) -> Worker:
    port = free_port()
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-c", PROBE, str(flag), "worker", "router", "parser", "grouper"],
            cwd=REPO, env={**env, "SAGA_HEALTH_PORT": str(port)},
            stdin=subprocess.DEVNULL, stdout=out, stderr=out,
        )  # fmt: skip
    return Worker(proc, port, log, ["router", "parser", "grouper"])


def probe_health(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
    except OSError:
        return 0, ""


def document_env(redis_url: str, keys: Keys, tmp_path: Path, **extra: str) -> dict[str, str]:
    env = worker_base_env(redis_url, keys, tmp_path / "data")
    env.pop("SAGA_PIPELINE")  # the real document pipeline
    return {**env, "SAGA_PARSER": "rules", **extra}


async def stop(worker: Worker, flag: Path) -> bool:
    """SIGTERM, the exit, and whether litellm was imported by then."""
    worker.signal(signal.SIGTERM)
    assert await worker.wait_exit(within=30) == 0, worker.tail()
    return imported(flag)


def imported(flag: Path) -> bool:
    return bool(json.loads(flag.read_text()))


async def test_a_model_worker_imports_litellm_before_ready_and_answers_livez_meanwhile(
    redis_url: str, keys: Keys, tmp_path: Path
) -> None:
    """/readyz says "warming up" (503) while litellm is imported in a thread, /livez is
    200 at those same moments, and litellm is imported once /readyz is 200."""
    env = document_env(redis_url, keys, tmp_path, SAGA_PARSER="llm",
                       SAGA_LLM_MODEL="openai/gpt-4o-mini",
                       SAGA_LLM_MOCK_RESPONSE='{"biomarkers": []}')  # fmt: skip
    flag = tmp_path / "litellm.json"
    worker = spawn(env, tmp_path / "worker.log", flag)
    seen: list[tuple[int, int, str]] = []
    try:

        async def ready() -> bool:
            assert worker.alive(), worker.tail()
            (live, _), (code, body) = await anyio.to_thread.run_sync(
                lambda: (probe_health(worker.port, "/livez"), probe_health(worker.port, "/readyz"))
            )
            seen.append((live, code, body))
            return code == 200

        await wait_until(ready, within=120, what="ready", every=0.05, on_timeout=worker.tail)
        warming = [s for s in seen if s[1] == 503 and "warming up" in s[2]]
        assert warming and all(live == 200 for live, _, _ in warming), seen[-5:]
        assert worker.logged("warmed_up"), worker.tail()
        assert await stop(worker, flag) is True
    finally:
        worker.kill()


async def test_the_offline_pipeline_never_imports_litellm(
    redis: Any, redis_url: str, keys: Keys, tmp_path: Path
) -> None:
    """A sample PDF through router, parser (rules) and grouper, no model configured:
    the worker never imports litellm."""
    from saga.api.client import SagaClient
    from saga.config.settings import load_settings
    from saga.samples import list_samples
    from saga.wiring.runtime import document_pipeline, keys_of

    env = document_env(redis_url, keys, tmp_path)
    flag = tmp_path / "litellm.json"
    worker = spawn(env, tmp_path / "worker.log", flag)
    try:
        await worker.wait_ready(within=120)
        settings = load_settings(env)
        sagas = SagaClient(redis, keys_of(settings), document_pipeline(settings), settings)
        sample = next(s for s in list_samples() if not s.fails_at)
        await sagas.start("warm-offline", "u-1", document=str(sample.path))
        await wait_completed(redis, keys, "warm-offline", within=60)
        assert await stop(worker, flag) is False
    finally:
        worker.kill()
