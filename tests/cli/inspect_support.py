"""Helpers of the CLI read-command tests (show, list, dlq, top, costs): the real entry
point in a subprocess, and sagas driven through claim/commit/fail by hand."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

from saga.state import recovery
from saga.state.keys import Keys
from saga.state.machine import StateMachine
from saga.state.model import Claim, FailAction
from saga.state.replies import text
from saga.state.requests import CommitRequest, FailRequest
from saga.state.streams import ensure_groups
from tests.state.helpers import NEXT, STEPS, claim_next, wait_lease_expired

__all__ = [
    "STEPS",
    "cli",
    "cli_json",
    "commit",
    "env_for",
    "fail",
    "machine",
    "python",
    "retried_and_reclaimed",
    "run_to_dead",
    "spawn",
    "start",
]


def env_for(keys: Keys, redis_url: str, **extra: str) -> dict[str, str]:
    """The environment of a CLI process on the test's server and key prefix."""
    env = {
        **os.environ,
        "REDIS_URL": redis_url,
        "SAGA_KEY_PREFIX": keys.prefix,
        "SAGA_PARTITIONS": str(keys.partitions),
        "SAGA_LOG_FORMAT": "json",
        **extra,
    }
    env.pop("NO_COLOR", None)
    return env


def python(
    keys: Keys, redis_url: str, *argv: str, env: dict[str, str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """``python <argv>`` with the CLI environment; output captured as text."""
    return subprocess.run(
        [sys.executable, *argv],
        env=env_for(keys, redis_url, **(env or {})),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def cli(
    keys: Keys, redis_url: str, *args: str, env: dict[str, str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """``saga <args>`` through ``python -m saga.cli.main`` against the test's key prefix."""
    return python(keys, redis_url, "-m", "saga.cli.main", *args, env=env, timeout=timeout)


def spawn(keys: Keys, redis_url: str, *args: str, **popen: Any) -> subprocess.Popen[str]:
    """``saga <args>`` started in the background (``--follow``, live views)."""
    popen.setdefault("text", True)
    return subprocess.Popen(
        [sys.executable, "-m", "saga.cli.main", *args], env=env_for(keys, redis_url), **popen
    )


def cli_json(keys: Keys, redis_url: str, *args: str) -> Any:
    """Run a command with ``--json``; it must exit 0 and print one JSON document."""
    res = cli(keys, redis_url, *args, "--json")
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


async def machine(redis: Any, keys: Keys) -> StateMachine:
    """A StateMachine with the groups (and the steps registry) every step needs."""
    await ensure_groups(redis, keys, STEPS)
    return StateMachine(redis, keys)


async def start(sm: StateMachine, record: str, user: str = "u-1") -> None:
    await sm.start(record, user, STEPS[0], input_json=b'{"document": "x"}')


async def commit(sm: StateMachine, step: str, worker: str = "w1", cost: float = 0.0) -> Claim:
    """Claim the next entry of ``step`` and commit it (moving to the next step); the
    router's commit stores a pages blob, as the real router does."""
    claim = await claim_next(sm, step, worker)
    pages = b'["page one"]' if step == "router" else None
    req = CommitRequest(output=b"{}", next_step=NEXT[step], worker=worker, cost=cost, pages=pages)
    out = await sm.commit(claim, req)
    assert out.code.name == "OK", out
    return claim


async def fail(
    sm: StateMachine,
    step: str,
    action: FailAction,
    *,
    worker: str = "w1",
    cost: float = 0.0,
    error: tuple[str, str] = ("TimeoutError", "provider timed out"),
) -> Claim:
    """Claim the next entry of ``step`` and fail it with ``action``."""
    claim = await claim_next(sm, step, worker)
    req = FailRequest(
        action=action, error_class=error[0], error_message=error[1], worker=worker, cost=cost
    )
    out = await sm.fail(claim, req)
    assert out.code.name == "OK", out
    return claim


async def run_to_dead(sm: StateMachine, record: str, step: str, user: str = "u-1") -> None:
    """Start a saga, commit the steps before ``step`` and dead-letter it at ``step``."""
    await start(sm, record, user)
    for s in STEPS[: STEPS.index(step)]:
        await commit(sm, s)
    await fail(sm, step, FailAction.DEAD, error=("ParseError", f"no table in {record}"))


async def retried_and_reclaimed(sm: StateMachine, record: str, user: str = "u-1") -> None:
    """router: attempt 1 fails and is retried ($0.001), attempt 2 commits ($0.002);
    parser: w1's lease expires, w2 reclaims and commits ($0.0123), and w1's late
    commit is fenced; grouper commits on w3."""
    await start(sm, record, user)
    await fail(sm, "router", FailAction.RETRY, cost=0.001)
    assert await sm.promote("router", 0, [record]) == (1, 0)
    await commit(sm, "router", cost=0.002)
    late = await claim_next(sm, "parser", "w1", lease_ms=1)
    await wait_lease_expired(sm.client, late.lease_until_ms)
    found = await recovery.recover_idle(sm, "parser", 0, worker="w2", min_idle_ms=0)
    entries = [(entry, text(fields[b"rid"])) for entry, fields in found.entries]
    outcomes = await sm.claim(
        "parser", 0, entries, worker="w2", lease_ms=30_000, max_lease_expiries=3
    )
    taken = outcomes[0].claim
    assert taken is not None, outcomes
    fenced = await sm.commit(late, CommitRequest(output=b"{}", next_step="grouper", worker="w1"))
    assert fenced.code.name == "LEASE_LOST", fenced
    req = CommitRequest(output=b"{}", next_step="grouper", worker="w2", cost=0.0123)
    assert (await sm.commit(taken, req)).code.name == "OK"
    await commit(sm, "grouper", "w3")
