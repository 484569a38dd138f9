"""The shipped users at work beyond the workers (deploy/redis/saga-users.acl): ``saga init``
as ``saga-loader`` moves an older release's budgets and drops its console tokens; budgets
are set as ``saga-operator`` and read as ``saga-readonly``; the console and its tokens
run as ``saga-console``, which nobody else can stand in for; and EVALSHA-only workers
(``saga-executor-sha``) run sagas whose scripts ``saga init`` loaded, waiting (alive, not
ready, one log line) while the server has lost them."""

from __future__ import annotations

import hashlib
import json
import time
from typing import Any

import pytest

from saga.state.model import SagaState
from tests.console.support import serve
from tests.executor.support import http_status, wait_until
from tests.faults.harness import FaultRun
from tests.faults.security import apply_acl, saga_cli, url_for

pytestmark = pytest.mark.anyio

PASSWORD = "test-pw-9d2a"
SECRET = "acl-test-console-secret-0123456789"


def as_user(run: FaultRun, user: str, **extra: str) -> dict[str, str]:
    return {**run.env(), "REDIS_URL": url_for(run.server.url, user, PASSWORD), **extra}


def init(run: FaultRun) -> dict[str, Any]:
    done = saga_cli(as_user(run, "saga-loader"), "init", "--json")
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


async def test_init_budgets_and_the_console_under_their_users(run: FaultRun) -> None:
    """As saga-loader, init moves `f:budgets` to `f/ops:budgets` and deletes the old
    sha256-keyed tokens; saga-operator sets budgets, saga-readonly shows them; tokens are
    added only as saga-console, and a console running as saga-console lists and cancels."""
    prefix = run.keys.prefix
    await apply_acl(run.redis, prefix, PASSWORD)
    await run.redis.hset(run.keys.legacy_budgets(), "u-old", '{"daily":2.0}')
    old = hashlib.sha256(b"saga_" + b"o" * 43).hexdigest()
    await run.redis.hset(run.keys.legacy_console_tokens(), old, '{"name":"x","role":"operator"}')
    first = init(run)
    assert (first["budgets_moved"], first["console_tokens_dropped"]) == (1, 1)
    assert await run.redis.hget(run.keys.budgets(), "u-old") == b'{"daily":2.0}'
    assert not await run.redis.exists(run.keys.legacy_budgets(), run.keys.legacy_console_tokens())
    assert (init(run)["budgets_moved"], init(run)["console_tokens_dropped"]) == (0, 0)

    done = saga_cli(as_user(run, "saga-operator"), "budget", "set", "u-new", "--daily", "5")
    assert done.returncode == 0, done.stderr
    shown = saga_cli(as_user(run, "saga-readonly"), "budget", "show", "--json")
    assert shown.returncode == 0, shown.stderr
    assert {b["user_id"] for b in json.loads(shown.stdout)["budgets"]} == {"u-old", "u-new"}

    for user in ("saga-operator", "saga-executor"):
        denied = saga_cli(as_user(run, user, SAGA_CONSOLE_SECRET=SECRET), "console", "token",
                          "add", "eve", "--role", "operator")  # fmt: skip
        assert denied.returncode == 2 and "lacks a permission" in denied.stderr, denied.stderr
    console_env = as_user(run, "saga-console", SAGA_CONSOLE_SECRET=SECRET)
    added = saga_cli(console_env, "console", "token", "add", "ana", "--role", "operator", "--json")
    assert added.returncode == 0, added.stderr
    token = json.loads(added.stdout)["token"]
    await run.start(["c-1", "c-2"])
    console = serve(console_env)
    try:
        async with console.client(token) as http:
            listed = await http.get("/api/v1/sagas")
            assert listed.status_code == 200, listed.text
            assert {s["record_id"] for s in listed.json()["sagas"]} == {"c-1", "c-2"}
            cancelled = await http.post("/api/v1/sagas/c-1/cancel", json={})
            assert cancelled.status_code == 200, cancelled.text
            budget = await http.put("/api/v1/budgets/u-web", json={"daily": 1})
            assert budget.status_code == 200, budget.text
    finally:
        console.stop()
    state = await run.redis.hget(run.keys.saga("c-1"), "state")
    assert state in (SagaState.CANCELLED.value.encode(), SagaState.COMPENSATING.value.encode())


async def test_evalsha_only_workers_wait_for_init_and_run_sagas(run: FaultRun) -> None:
    """A worker as saga-executor-sha (no +eval, no +script|load) waits, alive and not
    ready, with one `scripts_missing` line, until `saga init` (saga-loader) loads the
    scripts; then it runs sagas; after SCRIPT FLUSH it waits again instead of exiting,
    and finishes every saga once init has run again."""
    await apply_acl(run.redis, run.keys.prefix, PASSWORD)
    assert not any(await run.redis.script_exists(*_shas()))
    run.url = url_for(run.server.url, "saga-executor-sha", PASSWORD)
    worker = run.spawn()
    await wait_until(_logged(worker, "scripts_missing"), within=60, what="scripts_missing",
                     on_timeout=worker.tail)  # fmt: skip
    assert worker.alive() and http_status(worker.port, "/readyz") != 200
    init(run)
    await worker.wait_ready(within=120)
    first = [f"sha-{i:02d}" for i in range(10)]
    await run.start(first)
    await run.wait_terminal(first, within=60)

    await run.redis.script_flush()
    later = [f"sha-late-{i:02d}" for i in range(10)]
    await run.start(later)
    await wait_until(_logged(worker, "scripts_missing", 2), within=60,
                     what="scripts_missing again", on_timeout=worker.tail)  # fmt: skip
    assert worker.alive(), worker.tail()
    init(run)
    run.fault_end = time.monotonic()
    await run.finish(first + later)
    assert worker.alive() and "Traceback" not in worker.log.read_text(), worker.tail()


def _shas() -> list[str]:
    from saga.state.scripts import load_all

    return [s.sha for s in load_all().values()]


def _logged(worker: Any, event: str, times: int = 1) -> Any:
    """A predicate for wait_until: ``event`` logged at least ``times`` times."""

    async def enough() -> bool:
        assert worker.alive(), worker.tail()
        return len(worker.logged(event)) >= times

    return enough
