"""The shipped least-privilege ACL users (deploy/redis/saga-users.acl): workers run a
whole fault run as ``saga-executor``; the CLI reads as ``saga-readonly`` and steers as
``saga-operator``; KEDA reads lag as ``saga-keda``; the console runs as ``saga-console``;
what each must not do is refused, and no user writes another role's keys by any write
command it holds, directly or through a script."""

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
from tests.faults.security import (
    ANY_CALL,
    acl_users,
    apply_acl,
    held_commands,
    saga_cli,
    script_calls,
    url_for,
    write_calls,
)

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


async def outcome(client: aioredis.Redis, *command: str) -> str:
    """``refused`` (NOPERM), ``error`` (another error reply) or ``ran``."""
    try:
        await client.execute_command(*command)
    except NoPermissionError:
        return "refused"
    except ResponseError as exc:  # a script's refused call: "ACL failure in script: No ..."
        text = str(exc)
        return "refused" if "NOPERM" in text or "no permissions" in text.lower() else "error"
    return "ran"


async def refused(client: aioredis.Redis, *command: str) -> bool:
    return await outcome(client, *command) == "refused"


READ_ONLY_LETS_THROUGH = {"xreadgroup"}
"""Redis checks XREADGROUP as a read, so a ``%R~`` selector lets it move a consumer
group's pending entries. No ``saga/ops:*`` key is a stream (docs/security.md), so on
those keys it can only fail (NOGROUP, WRONGTYPE); the snapshot check holds it to that."""


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
    await controller.wait_ready(within=120)
    rids = [f"slow-0.3-{i:03d}" for i in range(60)] + ["perm-0"]
    await run.start(rids)
    await run.wait_running(rids, n=4)  # then kill one worker mid-step
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


CONSOLE_AND_OPS = ("console", "ops")
FOREIGN = {
    "saga-executor": CONSOLE_AND_OPS,
    "saga-executor-sha": CONSOLE_AND_OPS,
    "saga-controller": CONSOLE_AND_OPS,
    "saga-controller-sha": CONSOLE_AND_OPS,
    "saga-readonly": CONSOLE_AND_OPS,
    "saga-keda": CONSOLE_AND_OPS,
    "saga-operator": ("console",),
    "saga-loader": ("console",),
    "saga-console": (),
}
"""User -> the prefixes (``<prefix>/console``, ``<prefix>/ops``) it must not write."""


async def plant_foreign_keys(redis: aioredis.Redis, prefix: str) -> dict[str, list[str]]:
    """Console tokens, a session, the secret check and budgets, as the admin wrote them,
    and a key not yet there under each prefix: prefix name -> its keys."""
    console, ops = f"{prefix}/console", f"{prefix}/ops"
    await redis.hset(f"{console}:tokens", "a" * 64, '{"name":"olga","role":"operator"}')
    await redis.set(f"{console}:session:{'b' * 64}", "{}")
    await redis.set(f"{console}:secret-check", "c" * 64)
    await redis.hset(f"{ops}:budgets", mapping={"u1": '{"daily":1.0}', "f": "x", "n": "1"})
    return {
        "console": [f"{console}:tokens", f"{console}:session:{'b' * 64}",
                    f"{console}:secret-check", f"{console}:new"],
        "ops": [f"{ops}:budgets", f"{ops}:new"],
    }  # fmt: skip


async def snapshot(redis: aioredis.Redis, prefix: str) -> dict[bytes, bytes | None]:
    found = [k async for k in redis.scan_iter(match=f"{prefix}/*")]
    return {k: await redis.dump(k) for k in sorted(found)}


async def test_no_user_writes_another_roles_keys(run: FaultRun) -> None:
    """Every write command each shipped user holds, aimed at every key of the roles it is
    not (console tokens, sessions and secret check; budget limits; keys not yet there),
    directly and through EVAL and EVALSHA (keys declared or not): all refused, and the
    keys are byte for byte as before. Executors read budgets, never console keys."""
    prefix = run.keys.prefix
    await apply_acl(run.redis, prefix, PASSWORD)
    targets = await plant_foreign_keys(run.redis, prefix)
    sha = await run.redis.script_load(ANY_CALL)  # what a loader put there, for EVALSHA
    before = await snapshot(run.redis, prefix)
    users = acl_users()
    assert set(users) == set(FOREIGN), "a new shipped user needs its row in FOREIGN"
    flags = await run.redis.execute_command("COMMAND", "INFO", *{
        c for rules in users.values() for c in held_commands(rules)})  # fmt: skip
    tried = 0
    for user, foreign in FOREIGN.items():
        held = held_commands(users[user])
        writes = [c for c in held if "write" in flags[c]["flags"]]
        calls = write_calls("k")
        assert not set(writes) - set(calls), f"{user}: no test call for {set(writes) - set(calls)}"
        scripted = {"eval", "evalsha"} & set(held)
        client = aioredis.Redis.from_url(url_for(run.server.url, user, PASSWORD))
        try:
            for key in (k for name in foreign for k in targets[name]):
                for command in writes:
                    call = write_calls(key)[command]
                    read_only = "%R~saga/ops:*" in users[user] and key.startswith(f"{prefix}/ops")
                    want = (
                        {"refused", "error"}
                        if read_only and command in READ_ONLY_LETS_THROUGH
                        else {"refused"}
                    )
                    assert await outcome(client, *call) in want, (user, call)
                    for via in script_calls(key, call, sha):
                        if via[0].lower() in scripted:
                            assert await outcome(client, *via) in want, (user, via[:4], call)
                    tried += 1
        finally:
            await client.aclose()
    assert tried > 500
    assert await snapshot(run.redis, prefix) == before

    executor = aioredis.Redis.from_url(url_for(run.server.url, "saga-executor", PASSWORD))
    try:
        assert await executor.hget(f"{prefix}/ops:budgets", "u1") == b'{"daily":1.0}'
        assert await executor.hlen(f"{prefix}/ops:budgets") == 3
        for read in (("HGETALL", f"{prefix}/console:tokens"),
                     ("GET", f"{prefix}/console:secret-check")):  # fmt: skip
            assert await refused(executor, *read), read
    finally:
        await executor.aclose()
