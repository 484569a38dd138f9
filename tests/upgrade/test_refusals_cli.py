"""The worker, the controller and the CLI refuse a keyspace of a newer schema in one
sentence with exit 2; ``saga migrate`` moves an older one forward (real processes and a
real server)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from saga.state import schema_version
from saga.state.keys import Keys
from tests.cli.inspect_support import cli, cli_json
from tests.executor.support import REPO, wait_until, worker_base_env

CURRENT = schema_version.CURRENT
NEWER = CURRENT + 1


def _refused(proc: subprocess.CompletedProcess[str]) -> None:
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    refusal = [line for line in lines if "schema version" in line]
    assert refusal, proc.stderr
    assert "Traceback" not in proc.stderr
    assert f"version {NEWER}" in refusal[-1] and f"up to {schema_version.CURRENT}" in refusal[-1]
    assert "upgrade saga" in refusal[-1]


@pytest.fixture
async def newer(redis: Any, keys: Keys) -> Keys:
    await redis.hset(keys.partition_count(), "count", keys.partitions)
    await redis.hset(keys.schema_version(), "version", NEWER)
    return keys


@pytest.mark.anyio
@pytest.mark.parametrize("argv", [("list",), ("init",), ("migrate",), ("migrate", "--dry-run")])
async def test_commands_refuse_a_newer_schema(
    newer: Keys, redis_url: str, argv: tuple[str, ...]
) -> None:
    _refused(cli(newer, redis_url, *argv))


@pytest.mark.anyio
@pytest.mark.parametrize("argv", [("worker", "parser"), ("controller",)])
async def test_long_running_processes_refuse_a_newer_schema(
    newer: Keys, redis_url: str, tmp_path: Path, argv: tuple[str, ...]
) -> None:
    env = worker_base_env(redis_url, newer, tmp_path)
    done = await anyio.run_process(
        [sys.executable, "-m", "saga.cli.main", *argv], cwd=REPO, env=env, check=False
    )
    proc = subprocess.CompletedProcess(
        argv, done.returncode, done.stdout.decode(), done.stderr.decode()
    )
    _refused(proc)


@pytest.mark.anyio
async def test_migrate_dry_run_then_run_then_nothing(
    redis: Any, keys: Keys, redis_url: str
) -> None:
    await redis.hset(keys.partition_count(), "count", keys.partitions)  # made before versions
    await redis.hset(keys.legacy_budgets(), mapping={"u1": '{"daily": 1}', "u2": '{"daily": 2}'})
    dry = cli_json(keys, redis_url, "migrate", "--dry-run")
    assert dry["dry_run"] and (dry["from_version"], dry["to_version"]) == (0, CURRENT)
    assert dry["migrations"][0]["changed"] == 2
    assert await redis.hlen(keys.legacy_budgets()) == 2
    real = cli(keys, redis_url, "migrate", "--batch", "1")
    assert real.returncode == 0, real.stderr
    assert "budgets-to-ops-prefix: batch" in real.stderr  # progress, on stderr
    assert f"schema version 0 -> {CURRENT}" in real.stdout
    assert await redis.hlen(keys.budgets()) == 2
    assert await redis.hget(keys.schema_version(), "version") == str(CURRENT).encode()
    again = cli(keys, redis_url, "migrate")
    assert "nothing to migrate" in again.stdout
    assert json.loads(cli(keys, redis_url, "migrate", "--json").stdout)["migrations"] == []


def test_migrate_refuses_a_bad_batch(keys: Keys, redis_url: str) -> None:
    proc = cli(keys, redis_url, "migrate", "--batch", "0")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr


@pytest.mark.anyio
async def test_init_records_the_version_of_an_older_keyspace(
    redis: Any, keys: Keys, redis_url: str
) -> None:
    await redis.hset(keys.partition_count(), "count", keys.partitions)
    assert cli(keys, redis_url, "init").returncode == 0
    assert (
        await redis.hget(keys.schema_version(), "version") == str(schema_version.CURRENT).encode()
    )


@pytest.mark.anyio
async def test_a_running_controller_stops_once_the_keyspace_moves_past_it(
    redis: Any, keys: Keys, redis_url: str, tmp_path: Path
) -> None:
    """The keyspace moved past a running controller: it stops (exit 2), logging its own
    event (schema_version_refused), not a partition count change."""
    env = {**worker_base_env(redis_url, keys, tmp_path), "SAGA_PROMOTE_INTERVAL": "0.1"}
    log = tmp_path / "controller.log"
    proc = _start_controller(env, log)
    try:

        async def started() -> bool:
            assert proc.poll() is None, log.read_text()
            return "controller_started" in log.read_text()

        await wait_until(started, within=60, what="the controller to start")
        await redis.hset(keys.schema_version(), "version", NEWER)

        async def exited() -> bool:
            return proc.poll() is not None

        await wait_until(exited, within=30, what="the controller to stop")
        assert proc.returncode == 2, log.read_text()
        rows = [json.loads(ln) for ln in log.read_text().splitlines() if ln.startswith("{")]
        refused = [r for r in rows if "refused" in r["event"] or "changed" in r["event"]]
        assert [r["event"] for r in refused] == ["schema_version_refused"], log.read_text()
        assert f"schema version {NEWER}" in refused[0]["error"]
        assert "partition_count_changed" not in log.read_text()
    finally:
        proc.kill()
        proc.wait(timeout=10)


def _start_controller(env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "saga.cli.main", "controller"],
            cwd=REPO,
            env=env,
            stdout=out,
            stderr=out,
        )
