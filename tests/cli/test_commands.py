"""start, retry, cancel, init, config, server, worker and demo through the real entry point."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from saga.state.keys import Keys
from saga.state.reads import get_saga
from tests.cli.inspect_support import cli, cli_json, machine, run_to_dead
from tests.state.helpers import claim_next

pytestmark = pytest.mark.anyio


def test_start_twice_is_idempotent(keys: Keys, redis_url: str) -> None:
    """A second start of the same record and user returns the existing saga, exit 0."""
    first = cli_json(keys, redis_url, "start", "mr-1", "u-1", "--document", "file:///x.pdf")
    again = cli_json(keys, redis_url, "start", "mr-1", "u-1")
    assert first["created"] is True and again["created"] is False
    assert again["saga"]["state"] == "pending" and again["saga"]["step"] == "router"


def test_start_for_another_user_fails(keys: Keys, redis_url: str) -> None:
    """The same record for another user is refused with exit 1 and one sentence."""
    cli_json(keys, redis_url, "start", "mr-1", "u-1")
    res = cli(keys, redis_url, "start", "mr-1", "u-2")
    assert res.returncode == 1
    assert "another user" in res.stderr and res.stderr.count("\n") == 1


@pytest.mark.parametrize("bad", ["mr{1}", "has space", "", "x" * 129, "tab\there"])
def test_start_refuses_invalid_ids(keys: Keys, redis_url: str, bad: str) -> None:
    """An id that could break a key is refused with exit 2 before anything is written."""
    res = cli(keys, redis_url, "start", bad, "u-1")
    assert res.returncode == 2, res.stderr
    assert res.stderr.startswith("saga: record_id")


def test_unreachable_redis_exits_3(keys: Keys) -> None:
    """A closed port is exit 3 with a sentence that says what to check."""
    res = cli(keys, "redis://127.0.0.1:1/0", "start", "mr-1", "u-1")
    assert res.returncode == 3
    assert "cannot reach Redis" in res.stderr and "REDIS_URL" in res.stderr


def test_cancel_then_cancel_again(keys: Keys, redis_url: str) -> None:
    """Cancel reports the previous state; cancelling twice is a no-op; a missing record is 4."""
    cli_json(keys, redis_url, "start", "mr-1", "u-1")
    assert cli_json(keys, redis_url, "cancel", "mr-1")["previous_state"] == "pending"
    again = cli(keys, redis_url, "cancel", "mr-1")
    assert again.returncode == 0 and "already cancelled" in again.stdout
    assert cli(keys, redis_url, "cancel", "nope").returncode == 4


async def test_retry_refused_while_running_unless_forced(
    redis: Any, keys: Keys, redis_url: str
) -> None:
    """A step running under a live lease is not retried without --force (exit 1)."""
    sm = await machine(redis, keys)
    cli_json(keys, redis_url, "start", "mr-1", "u-1")
    await claim_next(sm, "router", "w1", lease_ms=60_000)
    res = cli(keys, redis_url, "retry", "mr-1", "--step", "router")
    assert res.returncode == 1 and "--force" in res.stderr
    forced = cli_json(keys, redis_url, "retry", "mr-1", "--step", "router", "--force")
    assert forced["epoch"] == 2
    assert (await get_saga(redis, keys, "mr-1")).state == "pending"


async def test_bulk_retry_dry_run_then_real(redis: Any, keys: Keys, redis_url: str) -> None:
    """--dry-run lists the sagas dead-lettered at the step and changes nothing; then retries."""
    sm = await machine(redis, keys)
    await run_to_dead(sm, "mr-a", "parser", "u-1")
    await run_to_dead(sm, "mr-b", "parser", "u-2")
    await run_to_dead(sm, "mr-c", "grouper", "u-1")
    dry = cli_json(keys, redis_url, "retry", "--step", "parser", "--failed", "--dry-run")
    assert sorted(dry["matched"]) == ["mr-a", "mr-b"] and dry["retried"] == []
    assert (await get_saga(redis, keys, "mr-a")).state == "failed"
    only_u2 = cli_json(keys, redis_url, "retry", "--step", "parser", "--user", "u-2", "--dry-run")
    assert only_u2["matched"] == ["mr-b"]
    real = cli_json(keys, redis_url, "retry", "--step", "parser", "--yes")
    assert sorted(real["retried"]) == ["mr-a", "mr-b"]
    for rid in ("mr-a", "mr-b"):
        saga = await get_saga(redis, keys, rid)
        assert (saga.state, saga.step, saga.epoch) == ("pending", "parser", 2)
    assert (await get_saga(redis, keys, "mr-c")).state == "failed"


def test_retry_usage_errors(keys: Keys, redis_url: str) -> None:
    """No record and no step, or an unknown step, is bad usage (exit 2)."""
    assert cli(keys, redis_url, "retry").returncode == 2
    assert cli(keys, redis_url, "retry", "--step", "nosuch").returncode == 2
    assert cli(keys, redis_url, "retry", "--step", "parser", "--since", "yesterday").returncode == 2


def test_init_creates_groups_once(keys: Keys, redis_url: str) -> None:
    """init creates a group per step at ID 0, and a second run creates none."""
    assert cli_json(keys, redis_url, "init")["groups_created"] == 3
    assert cli_json(keys, redis_url, "init")["groups_created"] == 0


def test_config_masks_secrets(keys: Keys) -> None:
    """saga config prints the effective settings with the key and password masked."""
    url = "redis://app:hunter2@127.0.0.1:1/0"
    res = cli(keys, url, "config", "--json", env={"SAGA_LLM_API_KEY": "sk-live-123"})
    assert res.returncode == 0, res.stderr
    assert "hunter2" not in res.stdout and "sk-live-123" not in res.stdout
    data = json.loads(res.stdout)
    assert data["llm_api_key"] == "***" and data["redis_url"].startswith("redis://app:***@")


def test_worker_usage_errors(keys: Keys, redis_url: str) -> None:
    """A worker with no step, or an unknown step, exits 2 without starting."""
    env = {"SAGA_STEP": ""}
    assert cli(keys, redis_url, "worker", env=env).returncode == 2
    res = cli(keys, redis_url, "worker", "nosuch")
    assert res.returncode == 2 and "unknown step" in res.stderr


def _embedded(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
    env.update(SAGA_DATA_DIR=str(tmp_path / "data"), SAGA_LOG_FORMAT="json")
    return subprocess.run([sys.executable, "-m", "saga.cli.main", *args], env=env,
                          capture_output=True, text=True, timeout=120, check=False)  # fmt: skip


def test_embedded_server_is_reused_across_processes(tmp_path: Path) -> None:
    """Without REDIS_URL, start in one process and show in another see the same data."""
    try:
        assert _embedded(tmp_path, "start", "mr-1", "u-1").returncode == 0
        shown = _embedded(tmp_path, "show", "mr-1", "--json")
        assert shown.returncode == 0, shown.stderr
        assert json.loads(shown.stdout)["saga"]["user_id"] == "u-1"
        status = json.loads(_embedded(tmp_path, "server", "status", "--json").stdout)
        assert status["running"] is True and status["url"].startswith("unix://")
        assert status["malloc"]  # e.g. "jemalloc (preloaded)", "libc (tuned)"
        assert (tmp_path / "data" / "appendonlydir").is_dir()
    finally:
        assert _embedded(tmp_path, "server", "stop").returncode == 0
    assert json.loads(_embedded(tmp_path, "server", "status", "--json").stdout)["running"] is False


def test_demo_runs_offline(tmp_path: Path) -> None:
    """saga demo completes the good samples, dead-letters the broken one, and shows costs."""
    try:
        res = _embedded(tmp_path, "demo")
        assert res.returncode == 0, res.stdout + res.stderr
        assert "all sagas ended as expected" in res.stdout
        assert "dead-lettered at router as intended: InvalidInputError" in res.stdout
        assert "cost     $0.0000" in res.stdout  # the mocked LLM naming is billed
        url = f"unix://{tmp_path / 'data' / 'saga.sock'}"
        assert f"the embedded server keeps running at {url}" in res.stdout  # said, not hidden
        assert "`saga server stop` stops it" in res.stdout
    finally:
        _embedded(tmp_path, "server", "stop")


async def test_demo_keeps_its_queues_from_a_running_worker(
    keys: Keys, redis_url: str, tmp_path: Path
) -> None:
    """A worker already running on the same Redis and prefix takes no demo step: the
    demo's sagas live under `<prefix>-demo`, none under the worker's prefix."""
    from tests.executor.support import spawn_worker, worker_base_env, worker_env

    env = worker_env(worker_base_env(redis_url, keys, tmp_path / "data"), SAGA_PIPELINE="")
    worker = spawn_worker(env, tmp_path / "worker.log", ["router", "parser", "grouper"])
    try:
        await worker.wait_ready(within=120)
        demo = await anyio.to_thread.run_sync(lambda: cli(keys, redis_url, "demo", timeout=180))
    finally:
        worker.kill()
    assert demo.returncode == 0, demo.stdout + demo.stderr
    assert f"SAGA_KEY_PREFIX={keys.prefix}-demo saga show" in demo.stdout
    assert cli_json(keys, redis_url, "list")["sagas"] == []
    assert not [e for e in worker.events() if str(e.get("record_id", "")).startswith("sample-")]
    demo_keys = Keys(prefix=f"{keys.prefix}-demo", partitions=keys.partitions)
    assert len(cli_json(demo_keys, redis_url, "list")["sagas"]) == 5


async def test_retry_from_parser_of_a_saga_failed_at_the_router_says_why(
    redis: Any, keys: Keys, redis_url: str
) -> None:
    """`retry --step parser` of a saga dead at the router re-runs from the router; the
    sentence says the router never committed, not that pages expired."""
    await run_to_dead(await machine(redis, keys), "mr-r", "router")
    res = cli(keys, redis_url, "retry", "mr-r", "--step", "parser")
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("saga mr-r re-runs from router in epoch 2"), res.stdout
    assert "router has not committed" in res.stdout and "expired" not in res.stdout
