"""Every transition called twice with the same operation id: the second call changes nothing.

redis-py re-sent a timed-out call up to ten times by default; our own resend loop re-sends
with the same op id, so a repeat must be answered from the record without writing. Each
case sets a saga up, makes the call once, snapshots every key under the test's prefix
(hashes, streams with their groups' pending lists, sorted sets, strings), makes the same
call again and compares.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from saga.state import operator
from saga.state.keys import Keys
from saga.state.machine import StateMachine
from saga.state.model import FailAction
from saga.state.recovery import recover_idle
from saga.state.requests import CommitRequest, FailRequest
from tests.state.helpers import claim_next, read_ready, snapshot, wait_lease_expired

pytestmark = pytest.mark.anyio

Call = Callable[[], Awaitable[Any]]
OP = "op-same"


async def _start(sm: StateMachine) -> Call:
    return lambda: sm.start("r1", "u1", "router", op=OP)


async def _claim(sm: StateMachine) -> Call:
    await sm.start("r1", "u1", "router")
    await sm.start("r2", "u1", "router")
    entries = await read_ready(sm.client, sm.keys, "router", "w-a")
    return lambda: sm.claim(
        "router", 0, entries, worker="w-a", lease_ms=60_000, max_lease_expiries=3, op=OP
    )


async def _claim_orphan(sm: StateMachine) -> Call:
    await sm.client.xadd(sm.keys.ready(0, "router"), {"rid": "ghost", "ep": "1", "v": "1"})
    entries = await read_ready(sm.client, sm.keys, "router", "w-a")
    return lambda: sm.claim(
        "router", 0, entries, worker="w-a", lease_ms=60_000, max_lease_expiries=3, op=OP
    )


async def _claim_dead_letter(sm: StateMachine) -> Call:
    await sm.start("r1", "u1", "router")
    c = await claim_next(sm, "router", "w-a", lease_ms=1, max_lease_expiries=1)
    await wait_lease_expired(sm.client, c.lease_until_ms)
    got = await recover_idle(sm, "router", 0, worker="w-b", min_idle_ms=0)
    entries = [(e, f[b"rid"].decode()) for e, f in got.entries]
    return lambda: sm.claim(
        "router", 0, entries, worker="w-b", lease_ms=60_000, max_lease_expiries=1, op=OP
    )


async def _heartbeat(sm: StateMachine) -> Call:
    await sm.start("r1", "u1", "router")
    c = await claim_next(sm, "router", "w-a")
    return lambda: sm.heartbeat(c, worker="w-a", lease_ms=60_000, op=OP)


async def _commit(sm: StateMachine, next_step: str = "parser") -> Call:
    await sm.start("r1", "u1", "router")
    c = await claim_next(sm, "router", "w-a")
    req = CommitRequest(output=b"{}", next_step=next_step, pages=b"P", cost=0.1, op=OP)
    return lambda: sm.commit(c, req)


async def _commit_last(sm: StateMachine) -> Call:
    return await _commit(sm, next_step="")


async def _commit_many(sm: StateMachine) -> Call:
    for rid in ("r1", "r2", "r3"):
        await sm.start(rid, "u1", "router")
    entries = await read_ready(sm.client, sm.keys, "router", "w-a")
    outs = await sm.claim("router", 0, entries, worker="w-a", lease_ms=60_000, max_lease_expiries=3)
    items: list[Any] = [
        (o.claim, CommitRequest(output=b"{}", next_step="parser", op=f"{OP}-{i}"))
        for i, o in enumerate(outs)
    ]
    return lambda: sm.finish_many(items)


async def _commit_stale(sm: StateMachine) -> Call:
    await sm.start("r1", "u1", "router")
    c = await claim_next(sm, "router", "w-a")
    await operator.retry(sm, "r1", "router", "_input", force=True)
    return lambda: sm.commit(c, CommitRequest(output=b"{}", next_step="parser", op=OP))


def _fail(action: FailAction) -> Callable[[StateMachine], Awaitable[Call]]:
    async def setup(sm: StateMachine) -> Call:
        await sm.start("r1", "u1", "router")
        c = await claim_next(sm, "router", "w-a")
        req = FailRequest(action=action, error_class="E", error_message="m", op=OP)
        return lambda: sm.fail(c, req)

    return setup


async def _fail_stale(sm: StateMachine) -> Call:
    await sm.start("r1", "u1", "router")
    c = await claim_next(sm, "router", "w-a")
    await operator.retry(sm, "r1", "router", "_input", force=True)
    req = FailRequest(action=FailAction.DEAD, error_class="E", error_message="m", op=OP)
    return lambda: sm.fail(c, req)


async def _promote(sm: StateMachine) -> Call:
    await sm.start("r1", "u1", "router")
    c = await claim_next(sm, "router", "w-a")
    await sm.fail(c, FailRequest(action=FailAction.RETRY, error_class="E", error_message="m"))
    return lambda: sm.promote("router", 0, ["r1"], op=OP)


def _retry(force: bool) -> Callable[[StateMachine], Awaitable[Call]]:
    async def setup(sm: StateMachine) -> Call:
        await sm.start("r1", "u1", "router")
        await claim_next(sm, "router", "w-a")
        return lambda: operator.retry(sm, "r1", "router", "_input", force=force, op=OP)

    return setup


async def _retry_failed(sm: StateMachine) -> Call:
    await sm.start("r1", "u1", "router")
    c = await claim_next(sm, "router", "w-a")
    await sm.fail(c, FailRequest(action=FailAction.DEAD, error_class="E", error_message="m"))
    return lambda: operator.retry(sm, "r1", "router", "_input", op=OP)


async def _cancel(sm: StateMachine) -> Call:
    await sm.start("r1", "u1", "router")
    await claim_next(sm, "router", "w-a")
    return lambda: operator.cancel(sm, "r1", op=OP)


CASES: dict[str, Callable[[StateMachine], Awaitable[Call]]] = {
    "start": _start,
    "claim": _claim,
    "claim-orphan-entry": _claim_orphan,
    "claim-dead-letters": _claim_dead_letter,
    "heartbeat": _heartbeat,
    "commit-next-step": _commit,
    "commit-completing": _commit_last,
    "commit-pipelined-batch": _commit_many,
    "commit-stale-token": _commit_stale,
    "fail-retry": _fail(FailAction.RETRY),
    "fail-park": _fail(FailAction.PARK),
    "fail-dead": _fail(FailAction.DEAD),
    "fail-stale-token": _fail_stale,
    "promote": _promote,
    "retry-forced-while-running": _retry(True),
    "retry-from-failed": _retry_failed,
    "cancel": _cancel,
}


@pytest.mark.parametrize("name", list(CASES))
async def test_second_call_with_same_op_changes_nothing(
    sm: StateMachine, keys: Keys, name: str
) -> None:
    """The second call of a transition with the same op id leaves every key as the first left it."""
    call = await CASES[name](sm)
    await call()
    before = await snapshot(sm.client, keys.prefix)
    await call()
    after = await snapshot(sm.client, keys.prefix)
    changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    assert changed == [], f"{name}: the repeat changed {changed}"


@pytest.mark.parametrize("force", [False, True])
async def test_retry_resent_after_an_executor_claimed_is_answered_from_the_record(
    sm: StateMachine, keys: Keys, force: bool
) -> None:
    """A retry re-sent after an executor already claimed its new entry changes nothing."""
    # The resend loop re-sends after 50 ms; an executor blocked on XREADGROUP claims the
    # new entry within that time, and its claim writes the saga's last op id.
    await sm.start("r1", "u1", "router")
    c = await claim_next(sm, "router", "w-a")
    await sm.fail(c, FailRequest(action=FailAction.DEAD, error_class="E", error_message="m"))
    first = await operator.retry(sm, "r1", "router", "_input", force=force, op=OP)
    claimed = await claim_next(sm, "router", "w-b")
    before = await snapshot(sm.client, keys.prefix)
    again = await operator.retry(sm, "r1", "router", "_input", force=force, op=OP)
    assert (again.epoch, again.entry_id, again.duplicate) == (first.epoch, first.entry_id, True)
    assert await snapshot(sm.client, keys.prefix) == before
    ok = await sm.commit(claimed, CommitRequest(output=b"{}", next_step="parser"))
    assert ok.code == 0
