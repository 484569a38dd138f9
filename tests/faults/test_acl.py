"""The shipped least-privilege ACL users (deploy/redis/saga-users.acl): workers run a
whole fault run as ``saga-executor``; the CLI reads as ``saga-readonly`` and steers as
``saga-operator``; KEDA reads lag as ``saga-keda``; what each must not do is refused."""

from __future__ import annotations

import json
import signal
import time

import pytest
import redis.asyncio as aioredis
from redis.exceptions import NoPermissionError, ResponseError

from saga.state.model import SagaState
from tests.controller.support import Procs
from tests.faults.harness import FaultRun
from tests.faults.security import apply_acl, saga_cli, url_for

pytestmark = pytest.mark.anyio

PASSWORD = "test-pw-5c1e"
REFUSED_TO_EXECUTORS = [
    ("SCRIPT", "FLUSH"),
    ("SCRIPT", "KILL"),
    ("FUNCTION", "FLUSH"),
    ("EVAL", "return redis.call('FLUSHALL')", "0"),  # EVAL is allowed, its commands are not
    ("FLUSHALL",),
    ("KEYS", "*"),
    ("CONFIG", "SET", "slowlog-log-slower-than", "0"),
    ("SLOWLOG", "GET"),
    ("INFO",),  # the controller's user has it; workers need not
    ("XGROUP", "DESTROY", "f:{p0}:ready:router", "executors"),
    ("DEL", "not-a-saga-key"),
]
REFUSED_TO_CONTROLLERS = [c for c in REFUSED_TO_EXECUTORS if c != ("INFO",)]


async def refused(client: aioredis.Redis, *command: str) -> bool:
    try:
        await client.execute_command(*command)
    except NoPermissionError:
        return True
    except ResponseError as exc:
        return "NOPERM" in str(exc) or "no permissions" in str(exc)
    return False


async def test_workers_and_cli_under_least_privilege_users(run: FaultRun) -> None:
    """A kill -9 run under saga-executor, beside a controller as saga-controller,
    completes; forbidden commands are refused to each user; the controller's check runs
    as saga-controller; the CLI reads as saga-readonly (and may not cancel) and steers
    as saga-operator."""
    await apply_acl(run.redis, run.keys.prefix, PASSWORD)
    controller_url = url_for(run.server.url, "saga-controller", PASSWORD)
    run.url = url_for(run.server.url, "saga-executor", PASSWORD)
    procs = Procs(run.tmp)
    controller = procs.controller(run.env(REDIS_URL=controller_url))
    ws = await run.spawn_ready(2)
    await controller.wait_ready(within=60)
    rids = [f"slow-0.3-{i:03d}" for i in range(60)] + ["perm-0"]
    await run.start(rids)
    time.sleep(0.8)  # noqa: ASYNC251 - let steps start, then kill one worker mid-step
    run.kill(ws[0], signal.SIGKILL)
    run.spawn()
    run.fault_end = time.monotonic()
    try:
        await run.finish(rids, want={"perm-0": SagaState.FAILED})
        assert controller.alive(), controller.tail()
    finally:
        procs.kill_all()
    assert "lacks a permission" not in controller.log.read_text(), controller.tail()
    check = saga_cli({**run.env(), "REDIS_URL": controller_url}, "controller", "--check", "--json")
    assert check.returncode == 0, check.stdout + check.stderr
    assert {c["name"] for c in json.loads(check.stdout)["checks"]} >= {"server", "groups"}

    for user, commands in [
        ("saga-executor", REFUSED_TO_EXECUTORS),
        ("saga-controller", REFUSED_TO_CONTROLLERS),
        (
            "saga-readonly",
            [("HSET", "f:{p0}:saga:x", "a", "b"), ("XADD", "f:{p0}:q", "*", "a", "b")],
        ),
        ("saga-keda", [("XRANGE", "f:{p0}:ready:router", "-", "+"), ("HGETALL", "f:{p0}:stats")]),
    ]:
        client = aioredis.Redis.from_url(url_for(run.server.url, user, PASSWORD))
        try:
            for command in commands:
                assert await refused(client, *command), (user, command)
        finally:
            await client.aclose()
    keda = aioredis.Redis.from_url(url_for(run.server.url, "saga-keda", PASSWORD))
    try:
        [group] = await keda.xinfo_groups(run.keys.ready(0, "router"))
        assert int(group["lag"] or 0) == 0 and int(group["pending"]) == 0
    finally:
        await keda.aclose()

    ro = {**run.env(), "REDIS_URL": url_for(run.server.url, "saga-readonly", PASSWORD)}
    for args in (
        ["list", "--json"],
        ["show", rids[0], "--json"],
        ["top", "--once"],
        ["dlq", "list"],
    ):
        done = saga_cli(ro, *args)
        assert done.returncode == 0, (args, done.stderr)
    denied = saga_cli(ro, "cancel", "perm-0")
    assert denied.returncode == 2 and "Traceback" not in denied.stderr, denied.stderr
    assert "lacks a permission" in denied.stderr and denied.stderr.count("\n") == 1
    rw = {**run.env(), "REDIS_URL": url_for(run.server.url, "saga-operator", PASSWORD)}
    done = saga_cli(rw, "retry", "perm-0", "--step", "router")
    assert done.returncode == 0, done.stderr
