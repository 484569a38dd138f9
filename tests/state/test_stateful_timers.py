"""The main model's timer rules (stateful_rules_waits, the commit rule's ``later``) catch a
broken run-next-at or signal: each mutant script (a commit that parks without a timer,
a resume that leaves the saga waiting, a cancel or a compensation that leaves the timer
behind, a signal that ends a timer's wait, kept signals left uncounted) fails a short
scripted run of the same machine that passes with the real scripts. A
purge that no longer refuses a waiting saga is caught by its own test below."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from redis.exceptions import ResponseError

import tests.state.test_stateful as stateful
from saga.state.model import SagaState
from saga.state.purge import Purger
from saga.state.requests import CommitRequest
from tests.state.helpers import claim_next
from tests.state.mutants import mutated

TIMER_MUTANTS = {
    "parked without a timer": (
        "includes/next_at.lua",
        "  redis.call('ZADD', waits, due_s, record)\n",
        "",
    ),
    "resume leaves it waiting": (
        "time_out_wait.lua",
        "redis.call('HSET', saga, 'state', STATE.PENDING, 'entry', entry, 'due', 0",
        "redis.call('HSET', saga, 'entry', entry, 'due', 0",
    ),
    "cancel leaves the timer": (
        "cancel_saga.lua",
        "  redis.call('ZREM', KEYS[15], record)\n",
        "",
    ),
    "compensate leaves the timer": (
        "compensate_saga.lua",
        "  redis.call('ZREM', KEYS[15 + n], record)\n",
        "",
    ),
}
SIGNAL_MUTANTS = {
    "a signal ends a timer": (
        "signal_saga.lua",
        "if s[1] == STATE.WAITING and s[5] == event then",
        "if s[1] == STATE.WAITING then",
    ),
    "kept signals not counted": (
        "signal_saga.lua",
        "redis.call('HINCRBY', saga, 'nsk', 1)",
        "",
    ),
}
PURGE_MUTANTS = {
    "purge takes a waiting saga": (
        "purge_record.lua",
        " or state == STATE.WAITING then",
        " then",
    ),
}


@pytest.fixture
def quiet_events(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stateful.harness, "event", lambda *_: None)


@pytest.fixture
def mutant(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    mutants = {**TIMER_MUTANTS, **SIGNAL_MUTANTS, **PURGE_MUTANTS}
    yield from mutated(monkeypatch, mutants, request.param)


def _timer_scenario(m: stateful.SagaMachine) -> None:
    """Three routers commit with "run the next step in ten minutes": r1 is cancelled, r2
    compensated, r0's timer forced due and swept twice (it fires once); r0 then completes."""
    m.start_some({"r0", "r1", "r2"})
    held = m.claim_ready("w-a")
    for claim in sorted(getattr(held, "values", held), key=lambda h: h[1].record_id):
        m.commit(claim, resend=True, review="", wrong_next=False, later=True)
    assert {r.state for r in m.model.values()} == {SagaState.WAITING}
    m.redis_agrees_with_model_and_invariants_hold()
    m.cancel("r1")
    m.compensate("r2", resend=False)
    m.redis_agrees_with_model_and_invariants_hold()
    m.fire_timers(force_due=False, resend=False)  # not due: nothing moves
    m.fire_timers(force_due=True, resend=True)
    m.redis_agrees_with_model_and_invariants_hold()
    m.work("w-a", None, undos=False)  # r0's parser
    m.redis_agrees_with_model_and_invariants_hold()
    assert m.model["r0"].state == SagaState.COMPLETED


@pytest.mark.parametrize("mutant", ["", *TIMER_MUTANTS], indirect=True)
def test_a_broken_timer_is_caught(redis_url: str, quiet_events: None, mutant: str) -> None:
    """The real scripts pass the scenario; every mutant fails a rule's or an invariant's check."""
    m = stateful.SagaMachine(redis_url)
    try:
        if not mutant:
            _timer_scenario(m)
            return
        with pytest.raises(AssertionError):
            _timer_scenario(m)
    finally:
        m.teardown()


def _signal_scenario(m: stateful.SagaMachine) -> None:
    """r0 waits on a run-next-at timer: a signal is kept (it ends no timer), another id of
    the event dropped, a resend seen; the timer then fires and the saga runs on."""
    m.start_some({"r0"})
    held = m.claim_ready("w-a")
    (claim,) = list(getattr(held, "values", held))
    m.commit(claim, resend=False, review="", wrong_next=False, later=True)
    m.signal("r0", "approved", "s0")
    m.signal("r0", "approved", "s1")
    m.signal("r0", "approved", "s0")
    m.redis_agrees_with_model_and_invariants_hold()
    m.fire_timers(force_due=True, resend=False)
    m.redis_agrees_with_model_and_invariants_hold()
    assert m.model["r0"].state == SagaState.PENDING and m.model["r0"].kept == {"approved": "s0"}


@pytest.mark.parametrize("mutant", ["", *SIGNAL_MUTANTS], indirect=True)
def test_a_broken_signal_is_caught(redis_url: str, quiet_events: None, mutant: str) -> None:
    """The real signal_saga passes; each mutant fails a rule's or an invariant's check."""
    m = stateful.SagaMachine(redis_url)
    try:
        if not mutant:
            _signal_scenario(m)
            return
        with pytest.raises((AssertionError, ResponseError)):  # ending a timer: no token
            _signal_scenario(m)
    finally:
        m.teardown()


@pytest.mark.anyio
@pytest.mark.parametrize("mutant", ["", *PURGE_MUTANTS], indirect=True)
async def test_purge_script_refuses_a_waiting_saga(sm: Any, mutant: str) -> None:
    """purge_record itself (past the Python check: a saga that parked between the read and
    the call) refuses a saga waiting on a timer; the mutant deletes it."""
    await sm.start("r1", "u1", "router")
    c = await claim_next(sm, "router", "w-a")
    out = await sm.commit(c, CommitRequest(output=b"{}", next_step="parser", run_after_ms=60_000))
    assert out.state == SagaState.WAITING
    purger = Purger(sm.client, sm.keys, ("router", "parser"))
    refused = await purger._run("r1", "u1", await purger._traces("r1", "u1"))
    if mutant:
        assert not await sm.client.exists(sm.keys.saga("r1")) and not refused
        return
    assert refused == "waiting" and await sm.client.exists(sm.keys.saga("r1"))
