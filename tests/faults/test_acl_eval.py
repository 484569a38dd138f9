"""What ``+eval`` still lets a user do (docs/security.md, "EVAL"): a CPU-bound script
sent by ``saga-executor`` blocks the server (BUSY for every other client) and that
user cannot ``SCRIPT KILL`` it; only an administrator can. The EVALSHA-only users
(``saga-executor-sha``, ``saga-controller-sha``) can neither send a script nor load
one, so they run only what ``saga init`` (``saga-loader``) loaded."""

from __future__ import annotations

import asyncio

import pytest
import redis.asyncio as aioredis
from redis.exceptions import BusyLoadingError, NoPermissionError, ResponseError

from tests.executor.support import wait_until
from tests.faults.harness import FaultRun
from tests.faults.security import apply_acl, url_for

pytestmark = pytest.mark.anyio

PASSWORD = "test-pw-eval-77"
SPIN = "local i = 0 while true do i = i + 1 end"


def as_user(run: FaultRun, user: str) -> aioredis.Redis:
    return aioredis.Redis.from_url(url_for(run.server.url, user, PASSWORD), socket_timeout=10)


async def test_an_executor_script_blocks_the_server_and_it_cannot_kill_it(run: FaultRun) -> None:
    await apply_acl(run.redis, run.keys.prefix, PASSWORD)
    await run.redis.config_set("busy-reply-threshold", "100")
    spinner, killer, other = as_user(run, "saga-executor"), as_user(run, "saga-executor"), (
        aioredis.Redis.from_url(run.server.url, socket_timeout=10))  # fmt: skip
    admin = aioredis.Redis.from_url(run.server.url, socket_timeout=10)
    try:
        await killer.ping()
        await other.ping()
        await admin.ping()
        spin = asyncio.create_task(spinner.eval(SPIN, 0))

        async def busy() -> bool:
            try:
                await other.ping()
            except (BusyLoadingError, ResponseError) as exc:
                return "BUSY" in str(exc)
            return False

        await wait_until(busy, within=10, what="BUSY for another client", every=0.05)
        with pytest.raises(NoPermissionError):
            await killer.script_kill()
        assert await busy(), "the script stopped without SCRIPT KILL"
        await admin.script_kill()  # an administrator's user can
        with pytest.raises(ResponseError, match="killed"):
            await asyncio.wait_for(spin, 10)
        assert await other.ping()
    finally:
        for c in (spinner, killer, other, admin):
            await c.aclose()


async def test_evalsha_only_users_can_send_no_script(run: FaultRun) -> None:
    await apply_acl(run.redis, run.keys.prefix, PASSWORD)
    loader = as_user(run, "saga-loader")
    loader_sha = await loader.script_load("return 1")
    await loader.aclose()
    for user in ("saga-executor-sha", "saga-controller-sha"):
        client = as_user(run, user)
        try:
            with pytest.raises(NoPermissionError):
                await client.eval(SPIN, 0)
            with pytest.raises(NoPermissionError):
                await client.script_load(SPIN)
            assert await client.evalsha(loader_sha, 0) == 1  # what the loader loaded runs
        finally:
            await client.aclose()
