"""`saga controller --check` (the helm test): exit 0 when Redis is ready for saga (warnings
allowed), 1 naming what to do when a check fails, 3 when Redis cannot be reached."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from saga.controller.check import Status, _aof, _eviction, _version
from tests.executor.support import REPO, free_port


def check(env: dict[str, str], *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "saga.cli.main", "controller", "--check", *extra],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_missing_groups_fail_and_init_fixes_them(base_env: dict[str, str]) -> None:
    """Before `saga init` the groups check fails (exit 1) and says so; after it, exit 0."""
    before = check(base_env, "--json")
    assert before.returncode == 1, before.stderr
    report = json.loads(before.stdout)
    groups = next(c for c in report["checks"] if c["name"] == "groups")
    assert report["ok"] is False and groups["status"] == "fail"
    assert "run `saga init`" in groups["detail"]
    init = subprocess.run(
        [sys.executable, "-m", "saga.cli.main", "init"],
        cwd=REPO, env=base_env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert init.returncode == 0, init.stderr
    after = check(base_env)
    assert after.returncode == 0, after.stdout + after.stderr
    assert "groups" in after.stdout and "fail" not in after.stdout


def test_unreachable_redis_exits_3_in_one_sentence(base_env: dict[str, str]) -> None:
    """No server at REDIS_URL: exit 3 and one line on stderr, no traceback."""
    env = {**base_env, "REDIS_URL": f"redis://127.0.0.1:{free_port()}/0"}
    result = check(env)
    assert result.returncode == 3
    assert result.stderr.startswith("saga: cannot reach Redis")
    assert "Traceback" not in result.stderr and len(result.stderr.splitlines()) == 1


@pytest.mark.parametrize(
    ("got", "status"),
    [
        (_version({"redis_version": "6.2.14"}), Status.FAIL),
        (_version({"redis_version": "7.2.4", "valkey_version": "8.1.1"}), Status.OK),
        (_aof({"aof_enabled": 0}), Status.WARN),
        (_aof({"aof_enabled": 1}), Status.OK),
        (_eviction({"maxmemory_policy": "allkeys-lru"}), Status.WARN),
        (_eviction({"maxmemory_policy": "noeviction"}), Status.OK),
    ],
)
def test_server_settings_are_judged(got: object, status: Status) -> None:
    """Redis < 7 fails; AOF off and an evicting policy warn; the recommended settings pass."""
    assert getattr(got, "status", None) == status
