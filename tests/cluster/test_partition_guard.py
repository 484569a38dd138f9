"""The partition count is guarded: stored at ``saga init`` (or by the first process),
a worker, a command or the client configured with another count refuses to run with
one sentence (the CLI and the worker with exit 2), and `saga partitions migrate`
changes it."""

from __future__ import annotations

import sys
import uuid
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest

from saga.api.client import SagaClient
from saga.config.settings import load_settings
from saga.state.errors import PartitionCountError
from saga.state.keys import Keys
from saga.state.partitions import guard, stored_count
from tests.executor.support import REPO, worker_base_env

pytestmark = pytest.mark.anyio


async def cli(env: dict[str, str], *args: str) -> tuple[int, str, str]:
    done = await anyio.run_process([sys.executable, "-m", "saga.cli.main", *args], cwd=REPO,
                                   env=env, check=False)  # fmt: skip
    return done.returncode, done.stdout.decode(), done.stderr.decode()


async def test_the_first_use_stores_the_count_and_another_is_refused(redis: Any) -> None:
    """guard() stores the count when none is stored, passes with it, refuses another."""
    prefix = f"g{uuid.uuid4().hex[:8]}"
    assert await stored_count(redis, Keys(prefix, 4)) is None
    assert await guard(redis, Keys(prefix, 4)) == 4
    assert await guard(redis, Keys(prefix, 4)) == 4
    with pytest.raises(PartitionCountError) as err:
        await guard(redis, Keys(prefix, 8))
    assert str(err.value) == (
        f"keyspace {prefix!r} has 4 partition(s) but SAGA_PARTITIONS=8; set "
        "SAGA_PARTITIONS=4, or move the records with `saga partitions migrate --to 8`"
    )


async def test_commands_with_another_count_exit_2_with_one_sentence(
    redis_url: str, tmp_path: Path
) -> None:
    """saga init stores 4; init, list, start and show with SAGA_PARTITIONS=8 exit 2 with
    one line on stderr; `partitions show` tells both; a migration makes 8 the count."""
    keys = Keys(f"g{uuid.uuid4().hex[:8]}", 4)
    env = worker_base_env(redis_url, keys, tmp_path)
    code, out, err = await cli(env, "init", "--json")
    assert code == 0, err
    assert msgspec.json.decode(out)["partitions"] == 4
    wrong = {**env, "SAGA_PARTITIONS": "8"}
    for args in (["init"], ["list"], ["start", "r1", "u1"], ["show", "r1"], ["top", "--once"]):
        code, out, err = await cli(wrong, *args)
        assert code == 2, (args, err)
        assert err.count("\n") == 1 and "has 4 partition(s) but SAGA_PARTITIONS=8" in err, err
        assert "Traceback" not in err
    code, out, _ = await cli(wrong, "partitions", "show", "--json")
    assert msgspec.json.decode(out) == {"prefix": keys.prefix, "stored": 4,
                                        "migrating_to": 0, "configured": 8}  # fmt: skip
    code, out, err = await cli(env, "partitions", "migrate", "--to", "8")
    assert code == 0, err
    assert (await cli(wrong, "list"))[0] == 0
    assert (await cli(env, "list"))[0] == 2


async def test_a_worker_with_another_count_refuses_to_start(
    redis: Any, redis_url: str, tmp_path: Path
) -> None:
    """A worker whose SAGA_PARTITIONS differs from the stored count exits 2 at start-up,
    saying which count to set, before reading anything."""
    keys = Keys(f"g{uuid.uuid4().hex[:8]}", 2)
    await guard(redis, keys)
    env = {**worker_base_env(redis_url, keys, tmp_path), "SAGA_PARTITIONS": "3"}
    code, _, err = await cli(env, "worker", "router", "--health-port", "-1")
    assert code == 2, err
    assert err.strip().splitlines()[-1] == (
        f"saga: keyspace {keys.prefix!r} has 2 partition(s) but SAGA_PARTITIONS=3; set "
        "SAGA_PARTITIONS=2, or move the records with `saga partitions migrate --to 3`."
    )


async def test_the_client_with_another_count_refuses(redis: Any, redis_url: str) -> None:
    """SagaClient refuses at `async with` and at its first start, before writing."""
    keys = Keys(f"g{uuid.uuid4().hex[:8]}", 2)
    await guard(redis, keys)
    env = {"REDIS_URL": redis_url, "SAGA_KEY_PREFIX": keys.prefix, "SAGA_PARTITIONS": "5"}
    settings = load_settings(env)
    with pytest.raises(PartitionCountError, match="has 2 partition"):
        async with SagaClient.from_settings(settings):
            pass
    client = SagaClient.from_settings(settings)
    try:
        with pytest.raises(PartitionCountError):
            await client.start("r1", "u1")
        assert not await redis.exists(Keys(keys.prefix, 5).saga("r1"))
    finally:
        await client.aclose()
