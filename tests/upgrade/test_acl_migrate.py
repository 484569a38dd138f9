"""``saga init`` as the shipped saga-loader user and ``saga migrate`` as saga-operator
record and move the schema version of an older keyspace: neither needs a command the
shipped ACL users lack (deploy/redis/saga-users.acl)."""

from __future__ import annotations

from typing import Any

import pytest

from saga.state import schema_version
from saga.state.keys import Keys
from tests.cli.inspect_support import cli
from tests.faults.security import apply_acl, url_for

pytestmark = pytest.mark.anyio
PASSWORD = "upgrade-test-password"


async def test_loader_inits_and_operator_migrates(redis: Any, keys: Keys, redis_url: str) -> None:
    names = await apply_acl(redis, keys.prefix, PASSWORD)
    try:
        await redis.hset(keys.partition_count(), "count", keys.partitions)  # before versions
        await redis.hset(keys.legacy_budgets(), "u1", '{"daily": 1}')
        operator = url_for(redis_url, "saga-operator", PASSWORD)
        dry = cli(keys, operator, "migrate", "--dry-run")
        assert dry.returncode == 0, dry.stderr
        assert f"would become {schema_version.CURRENT}" in dry.stdout
        done = cli(keys, operator, "migrate")
        assert done.returncode == 0, done.stderr
        assert (
            await redis.hget(keys.schema_version(), "version")
            == str(schema_version.CURRENT).encode()
        )
        assert await redis.hget(keys.budgets(), "u1") == b'{"daily": 1}'
        loader = url_for(redis_url, "saga-loader", PASSWORD)
        init = cli(keys, loader, "init")
        assert init.returncode == 0, init.stderr
    finally:
        for name in names:
            await redis.execute_command("ACL", "DELUSER", name)


async def test_loader_records_the_version_of_a_new_keyspace(
    redis: Any, keys: Keys, redis_url: str
) -> None:
    names = await apply_acl(redis, keys.prefix, PASSWORD)
    try:
        init = cli(keys, url_for(redis_url, "saga-loader", PASSWORD), "init")
        assert init.returncode == 0, init.stderr
        assert (
            await redis.hget(keys.schema_version(), "version")
            == str(schema_version.CURRENT).encode()
        )
    finally:
        for name in names:
            await redis.execute_command("ACL", "DELUSER", name)
