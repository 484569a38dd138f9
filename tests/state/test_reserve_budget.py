"""reserve_budget, the settle in commit and fail, and lapse_holds, against a real server:
a call's worst-case cost is held before it is made, the commit or fail that attributes
its real cost releases the hold exactly once, and a killed attempt's hold lapses."""

from __future__ import annotations

import time
from typing import Any

import msgspec
import pytest

from saga.state import budget_holds, budgets, operator
from saga.state.budget_holds import HoldRequest
from saga.state.budgets import Budget
from saga.state.days import utc_day
from saga.state.errors import LeaseLostError
from saga.state.keys import Keys
from saga.state.machine import StateMachine
from saga.state.model import Claim, FailAction
from saga.state.requests import CommitRequest, FailRequest
from tests.state.helpers import claim_next, server_ms

pytestmark = pytest.mark.anyio


def _hold(keys: Keys, claim: Claim, usd: float, n: int = 0) -> HoldRequest:
    hold_id = keys.llm_cache(claim.record_id, claim.step, f"e{claim.epoch}-call{n}")
    return HoldRequest(
        record_id=claim.record_id,
        user_id=claim.user_id,
        token=claim.token,
        hold_id=hold_id,
        usd=usd,
        deadline_ms=claim.lease_until_ms,
    )


async def _held(redis: Any, keys: Keys, user: str = "u1") -> float:
    return (await budgets.held_of(redis, [keys], [user]))[user]


async def _spent(redis: Any, keys: Keys, user: str = "u1") -> float:
    raw = await redis.hget(keys.spend(0, utc_day()[1]), user)
    return float(raw) if raw else 0.0


async def _running(sm: StateMachine, *rids: str, user: str = "u1") -> list[Claim]:
    for rid in rids:
        await sm.start(rid, user, "router")
    return [await claim_next(sm, "router", "w") for _ in rids]


async def test_holds_add_up_to_the_budget_and_no_further(
    sm: StateMachine, keys: Keys, redis: Any
) -> None:
    """Three $0.4 calls against $1: two are held, the third does not fit and is told why
    (its budget, what is spent and held); nothing of it is held."""
    claims = await _running(sm, "r1", "r2", "r3")
    budget = Budget(daily=1.0)
    for c in claims[:2]:
        assert await budget_holds.reserve(redis, keys, [keys], _hold(keys, c, 0.4), budget) is None
    over = await budget_holds.reserve(redis, keys, [keys], _hold(keys, claims[2], 0.4), budget)
    assert over is not None and over.period == "daily" and over.limit == 1.0
    assert over.spent == pytest.approx(0.8)
    # It would fit once the holds settle below their estimate: it parks briefly.
    assert over.resumes_at - time.time() <= budget_holds.HELD_RETRY_S + 1
    assert await _held(redis, keys) == pytest.approx(0.8)


async def test_a_call_that_cannot_fit_even_alone_parks_until_the_next_period(
    sm: StateMachine, keys: Keys, redis: Any
) -> None:
    [c] = await _running(sm, "r1")
    over = await budget_holds.reserve(redis, keys, [keys], _hold(keys, c, 2.0), Budget(daily=1.0))
    assert over is not None and over.resumes_at > time.time() + 60  # next UTC midnight


async def test_commit_settles_the_real_cost_and_releases_the_hold_once(
    sm: StateMachine, keys: Keys, redis: Any
) -> None:
    """The commit that passes the call's cache key adds the real cost to the spend and
    takes the whole hold off: spend + held goes from 0.5 (held) to 0.1 (spent). A re-sent
    commit releases nothing more."""
    [c] = await _running(sm, "r1")
    hold = _hold(keys, c, 0.5)
    assert await budget_holds.reserve(redis, keys, [keys], hold, Budget(daily=1.0)) is None
    assert await _held(redis, keys) == pytest.approx(0.5)
    req = CommitRequest(output=b"{}", cost=0.1, cost_keys=(hold.hold_id,), op="op-1")
    await sm.commit(c, req)
    await sm.commit(c, req)
    assert await _held(redis, keys) == 0.0
    assert await _spent(redis, keys) == pytest.approx(0.1)
    assert await redis.zcard(keys.holds_due(0)) == 0


async def test_fail_settles_too(sm: StateMachine, keys: Keys, redis: Any) -> None:
    [c] = await _running(sm, "r1")
    hold = _hold(keys, c, 0.5)
    await budget_holds.reserve(redis, keys, [keys], hold, Budget(daily=1.0))
    fail = FailRequest(action=FailAction.RETRY, error_class="E", error_message="m", cost=0.2,
                       cost_keys=(hold.hold_id,))  # fmt: skip
    await sm.fail(c, fail)
    assert await _held(redis, keys) == 0.0
    assert await _spent(redis, keys) == pytest.approx(0.2)


async def test_a_fenced_attempt_cannot_reserve(sm: StateMachine, keys: Keys, redis: Any) -> None:
    [c] = await _running(sm, "r1")
    stale = msgspec.structs.replace(_hold(keys, c, 0.1), token="9:9")
    with pytest.raises(LeaseLostError):
        await budget_holds.reserve(redis, keys, [keys], stale, Budget(daily=1.0))
    assert await _held(redis, keys) == 0.0


async def test_a_killed_attempts_hold_lapses_once_its_lease_is_gone(
    sm: StateMachine, keys: Keys, redis: Any
) -> None:
    """The sweep leaves a hold of a live attempt (it moves to the lease), releases one whose
    attempt lost its lease to a new claim, counts it in the partition's stats, and a later
    commit of the cached answer releases nothing twice."""
    [c] = await _running(sm, "r1")
    hold = _hold(keys, c, 0.5)
    await budget_holds.reserve(redis, keys, [keys], hold, Budget(daily=1.0))
    now = await server_ms(redis)
    await redis.zadd(keys.holds_due(0), {hold.hold_id: now - 1})  # as if its deadline passed
    live = await budget_holds.lapse_holds(redis, keys, 0, now_ms=now)
    assert (live.released, live.extended) == (0, 1)
    assert await _held(redis, keys) == pytest.approx(0.5)
    # The attempt is killed: an operator's retry takes the step over (a new token).
    await operator.retry(sm, c.record_id, "router", "_input", force=True)
    await redis.zadd(keys.holds_due(0), {hold.hold_id: now - 1})
    gone = await budget_holds.lapse_holds(redis, keys, 0, now_ms=now)
    assert (gone.released, gone.usd) == (1, 0.5)
    assert await _held(redis, keys) == 0.0
    assert await redis.hget(keys.stats(0), "holds_lapsed") == b"1"
    again = await budget_holds.lapse_holds(redis, keys, 0, now_ms=now)
    assert again.released == 0


async def test_a_rerun_of_the_same_call_takes_over_the_hold(
    sm: StateMachine, keys: Keys, redis: Any
) -> None:
    """A killed attempt's call, run again by the next attempt (same cache key), holds
    nothing more: the hold becomes the new attempt's, and its commit settles it."""
    [c] = await _running(sm, "r1")
    hold = _hold(keys, c, 0.5)
    await budget_holds.reserve(redis, keys, [keys], hold, Budget(daily=1.0))
    await operator.retry(sm, c.record_id, "router", "_input", force=True)
    c2 = await claim_next(sm, "router", "w2")
    again = HoldRequest(record_id=c2.record_id, user_id="u1", token=c2.token,
                        hold_id=hold.hold_id, usd=0.5, deadline_ms=c2.lease_until_ms)  # fmt: skip
    assert await budget_holds.reserve(redis, keys, [keys], again, Budget(daily=1.0)) is None
    assert await _held(redis, keys) == pytest.approx(0.5)
    await sm.commit(c2, CommitRequest(output=b"{}", cost=0.3, cost_keys=(hold.hold_id,)))
    assert (await _held(redis, keys), await _spent(redis, keys)) == (0.0, pytest.approx(0.3))


async def test_an_undo_attempt_reserves_and_its_commit_or_fail_settles(
    sm: StateMachine, keys: Keys, redis: Any
) -> None:
    """Calls inside a compensation hold the same way: the undo attempt (the saga is
    'compensating') reserves; fail_undo settles one attempt's hold, commit_undo the next's."""
    from saga.state.streams import ensure_groups

    await ensure_groups(redis, keys, ["undo:router"])
    await sm.start("r1", "u1", "router")
    c = await claim_next(sm, "router", "w")
    await sm.commit(c, CommitRequest(output=b"{}", next_step="parser"))
    c = await claim_next(sm, "parser", "w")
    dead = FailRequest(action=FailAction.DEAD, error_class="E", error_message="m",
                       undo=("router",))  # fmt: skip
    assert (await sm.fail(c, dead)).state == "compensating"
    undo = await claim_next(sm, "undo:router", "w-u", prev_step="_input")
    hold = _hold(keys, undo, 0.25)
    assert await budget_holds.reserve(redis, keys, [keys], hold, Budget(daily=1.0)) is None
    assert await _held(redis, keys) == 0.25
    retry = FailRequest(action=FailAction.RETRY, error_class="E", error_message="m", cost=0.1,
                        cost_keys=(hold.hold_id,))  # fmt: skip
    await sm.fail(undo, retry)
    assert (await _held(redis, keys), await _spent(redis, keys)) == (0.0, pytest.approx(0.1))
    await redis.zadd(keys.delayed(0, "undo:router"), {"r1": 0})
    await sm.promote("undo:router", 0, ["r1"])
    undo = await claim_next(sm, "undo:router", "w-u", prev_step="_input")
    hold = _hold(keys, undo, 0.25, n=1)
    assert await budget_holds.reserve(redis, keys, [keys], hold, Budget(daily=1.0)) is None
    await sm.commit(undo, CommitRequest(output=b"{}", cost=0.05, cost_keys=(hold.hold_id,)))
    assert (await _held(redis, keys), await _spent(redis, keys)) == (0.0, pytest.approx(0.15))


async def test_budget_show_counts_what_is_held_against_what_is_left(
    sm: StateMachine, keys: Keys, redis: Any
) -> None:
    """``statuses`` (saga budget show, the console, the API) carries the user's holds."""
    await budgets.set_budget(redis, keys, "u1", Budget(daily=1.0))
    [c] = await _running(sm, "r1")
    await budget_holds.reserve(redis, keys, [keys], _hold(keys, c, 0.25), Budget(daily=1.0))
    [status] = await budgets.statuses(redis, keys, "u1")
    assert (status.reserved_usd, status.spent_today_usd, status.exceeded) == (0.25, 0.0, "")


async def test_a_call_estimated_at_nothing_still_parks_at_a_zero_or_spent_budget(
    sm: StateMachine, keys: Keys, redis: Any
) -> None:
    """A model litellm cannot price holds $0: a zero budget still stops it."""
    [c] = await _running(sm, "r1")
    over = await budget_holds.reserve(redis, keys, [keys], _hold(keys, c, 0.0), Budget(daily=0.0))
    assert over is not None and over.period == "daily"
    assert await budget_holds.reserve(redis, keys, [keys], _hold(keys, c, 0.0), Budget()) is None
