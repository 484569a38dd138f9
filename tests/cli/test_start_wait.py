"""saga start --wait: a hint once when no worker reads the saga's step, exit 5 when
--timeout runs out, and a real worker carrying the saga to its end."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest

from saga.samples import list_samples
from saga.state.keys import Keys
from tests.cli.inspect_support import cli
from tests.executor.support import spawn_worker, worker_base_env, worker_env

pytestmark = pytest.mark.anyio


def test_no_worker_is_said_once_and_timeout_exits_5(keys: Keys, redis_url: str) -> None:
    """With nobody reading the router queue: one hint naming `saga worker router`, the
    wait goes on, and --timeout ends it with exit 5 and one sentence."""
    res = cli(keys, redis_url, "start", "mr-1", "u-1", "--wait", "--timeout", "6", timeout=90)
    assert res.returncode == 5, res.stderr
    assert "Traceback" not in res.stderr
    hints = [line for line in res.stderr.splitlines() if "no worker is reading" in line]
    assert len(hints) == 1, res.stderr
    assert "`saga worker router`" in hints[0] and "`saga up`" in hints[0]
    assert "still pending at router after 6s" in res.stderr
    assert "  pending at router (attempt 0)" in res.stdout  # progress stayed on stdout


def test_timeout_with_json_prints_the_saga_so_far(keys: Keys, redis_url: str) -> None:
    """--wait --json --timeout: the start document as it stood, then exit 5."""
    res = cli(keys, redis_url, "start", "mr-2", "u-1", "--wait", "--timeout", "1", "--json")
    assert res.returncode == 5, res.stderr
    assert '"state": "pending"' in res.stdout and '"created": true' in res.stdout


async def test_worker_carries_the_saga_to_its_end(
    keys: Keys, redis_url: str, tmp_path: Path
) -> None:
    """With a worker of the document pipeline running, --wait ends at completed, exit 0,
    and no hint is printed."""
    env = worker_env(worker_base_env(redis_url, keys, tmp_path / "data"), SAGA_PIPELINE="")
    worker = spawn_worker(env, tmp_path / "worker.log", ["router", "parser", "grouper"])
    try:
        await worker.wait_ready(within=120)
        doc = str(next(s.path for s in list_samples() if not s.fails_at))
        res = cli(keys, redis_url, "start", "mr-3", "u-1", "--document", doc, "--wait",
                  "--timeout", "60", timeout=90)  # fmt: skip
    finally:
        with contextlib.suppress(Exception):
            worker.kill()
    assert res.returncode == 0, res.stderr + worker.tail()
    assert "completed at grouper" in res.stdout
    assert "no worker" not in res.stderr


async def test_hint_comes_at_once_after_the_last_worker_stopped(
    keys: Keys, redis_url: str, tmp_path: Path
) -> None:
    """A worker that stopped cleanly (SIGTERM) leaves at once: the hint is said after
    NO_WORKER_AFTER_S, not a minute later when its group consumer looks idle."""
    import signal

    env = worker_env(worker_base_env(redis_url, keys, tmp_path / "data"), SAGA_PIPELINE="")
    worker = spawn_worker(env, tmp_path / "worker.log", ["router"])
    try:
        await worker.wait_ready(within=120)
        worker.signal(signal.SIGTERM)
        assert await worker.wait_exit(within=30) == 0, worker.tail()
    finally:
        with contextlib.suppress(Exception):
            worker.kill()
    res = cli(keys, redis_url, "start", "mr-4", "u-1", "--wait", "--timeout", "8", timeout=90)
    assert res.returncode == 5, res.stderr
    assert "no worker is reading the router queue" in res.stderr
