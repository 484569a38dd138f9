"""``saga migrate`` killed for real (SIGKILL of the process, mid-run, between or inside a
batch) resumes where it was: the next run ends with every history packed, each event as
before, the version recorded once; a run after that has nothing to migrate (issue 34)."""

from __future__ import annotations

import signal
import subprocess
from typing import Any

import pytest

from saga.state import schema_version
from saga.state.keys import Keys
from tests.cli.inspect_support import cli, spawn
from tests.upgrade.test_migrate_history import ID, _all_packed, _events, _v1_keyspace

pytestmark = pytest.mark.anyio


async def test_a_migrate_killed_mid_run_resumes_to_the_same_end(
    redis: Any, keys: Keys, redis_url: str
) -> None:
    """One record a batch: SIGKILL once the fifth batch is reported; the cursor is stored,
    the version still 1; a second run finishes, a third has nothing to do."""
    before = await _v1_keyspace(redis, keys)
    proc = spawn(keys, redis_url, "migrate", "--batch", "1", stderr=subprocess.PIPE)
    try:
        assert proc.stderr is not None
        for line in proc.stderr:  # progress lines, one a batch; EOF ends the loop
            if f"{ID}: batch 5," in line:
                proc.send_signal(signal.SIGKILL)
                break
        assert proc.wait(timeout=60) == -signal.SIGKILL, "migrate ended before the kill"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    assert await redis.hget(keys.migrations(), f"{ID}:cursor")  # where the next run starts
    assert await schema_version.read_version(redis, keys) == 1
    assert not await _all_packed(redis, keys)  # the kill landed with work left
    done = cli(keys, redis_url, "migrate", "--batch", "50")
    assert done.returncode == 0, done.stderr
    assert await schema_version.read_version(redis, keys) == 2
    assert await _all_packed(redis, keys)
    assert {r: await _events(redis, keys, r) for r in before} == before
    again = cli(keys, redis_url, "migrate")
    assert again.returncode == 0 and "nothing to migrate" in again.stdout, again.stdout
