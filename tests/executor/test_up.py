"""`saga up`: one worker process per step against one Redis, logs prefixed, Ctrl-C stops all."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from saga.api.client import SagaClient
from saga.state.keys import Keys
from tests.executor.support import REPO, states, wait_until

pytestmark = pytest.mark.anyio


def _spawn_up(env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with open(log, "wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "saga.cli.main", "up", "--workers-per-step", "1"],
            cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip


async def test_up_runs_a_process_per_step_and_stops_on_ctrl_c(
    base_env: dict[str, str], sagas: SagaClient, redis: Any, keys: Keys, tmp_path: Path
) -> None:
    """Sagas complete through three worker processes; SIGINT drains them and exits 0."""
    log = tmp_path / "up.log"
    up = _spawn_up(base_env, log)
    try:
        rids = [f"up-{i}-{uuid.uuid4().hex[:6]}" for i in range(5)]
        for rid in rids:
            await sagas.start(rid, "u1")

        async def done() -> bool:
            assert up.poll() is None, log.read_text()
            return await states(redis, keys, rids) == ["completed"] * len(rids)

        await wait_until(done, within=60, what="sagas to complete under saga up")
        up.send_signal(signal.SIGINT)
        assert up.wait(timeout=60) == 0, log.read_text()
    finally:
        if up.poll() is None:
            up.kill()
    text = log.read_text()
    for name in ("router-1", "parser-1", "grouper-1"):
        assert re.search(rf"^{name} +\| ", text, re.M), name
    assert text.count("worker_stopped") == 3
