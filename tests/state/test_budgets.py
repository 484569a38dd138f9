"""Budgets in the state layer: the pure decision (which period is spent, when it ends),
the spend counters commit and fail keep per user, day and month, and unpark_sagas."""

from __future__ import annotations

import calendar
from typing import Any

import pytest

from saga.state import budgets
from saga.state.budgets import Budget, Spend, next_day, next_month, over_budget
from saga.state.codes import RC
from saga.state.days import utc_day
from saga.state.keys import Keys
from saga.state.machine import StateMachine
from saga.state.model import FailAction, SagaState
from saga.state.requests import CommitRequest, FailRequest
from tests.state.helpers import claim_next, events, saga_hash

pytestmark = pytest.mark.anyio

NOON = calendar.timegm((2026, 12, 31, 12, 0, 0))


@pytest.mark.parametrize(
    ("budget", "spend", "expected"),
    [
        (None, Spend(9, 9), None),
        (Budget(daily=1.0), Spend(0.99, 50), None),
        (Budget(daily=1.0), Spend(1.0, 1.0), ("daily", next_day(NOON))),
        (Budget(monthly=5.0), Spend(0, 5.5), ("monthly", next_month(NOON))),
        (Budget(daily=1.0, monthly=5.0), Spend(2, 6), ("monthly", next_month(NOON))),
        (Budget(daily=0.0), Spend(0, 0), ("daily", next_day(NOON))),
    ],
)
def test_over_budget(budget: Budget | None, spend: Spend, expected: Any) -> None:
    """The monthly budget wins when both are spent; a zero budget parks at once."""
    found = over_budget(budget, spend, NOON)
    assert (found.period, found.resumes_at) == expected if found else expected is None


def test_periods_end_at_utc_midnight_and_month_start() -> None:
    """The last day of a year rolls into January 1st of the next."""
    assert next_day(NOON) == calendar.timegm((2027, 1, 1, 0, 0, 0))
    assert next_month(NOON) == calendar.timegm((2027, 1, 1, 0, 0, 0))
    assert next_month(calendar.timegm((2026, 2, 3, 5, 0, 0))) == calendar.timegm(
        (2026, 3, 1, 0, 0, 0)
    )


def test_a_negative_budget_is_refused() -> None:
    """Budgets are amounts in USD, never negative."""
    with pytest.raises(ValueError, match="between 0 and 1e9"):
        Budget(daily=-1.0)


async def test_commit_and_fail_count_spend_per_user_day_and_month(
    sm: StateMachine, keys: Keys, redis: Any
) -> None:
    """A commit's and a failure's cost land in the user's month and day fields, with a TTL;
    ``spend_of`` sums them over partitions; an attempt with no cost writes nothing."""
    for rid in ("r1", "r2", "r3"):
        await sm.start(rid, "u1", "router")
    await sm.commit(await claim_next(sm, "router", "w"), CommitRequest(output=b"{}", cost=0.25))
    fail = FailRequest(action=FailAction.RETRY, error_class="E", error_message="m", cost=0.5)
    await sm.fail(await claim_next(sm, "router", "w"), fail)
    await sm.commit(await claim_next(sm, "router", "w"), CommitRequest(output=b"{}"))
    _, month, dd = utc_day()
    raw = await redis.hgetall(keys.spend(0, month))
    assert {k.decode(): float(v) for k, v in raw.items()} == {"u1": 0.75, f"u1|{dd}": 0.75}
    assert 0 < await redis.ttl(keys.spend(0, month)) <= 40 * 86400
    import time

    assert await budgets.spend_of(redis, [keys], ["u1", "u2"], time.time()) == {
        "u1": Spend(0.75, 0.75), "u2": Spend(0.0, 0.0)}  # fmt: skip


async def _budget_parked(sm: StateMachine, rid: str, user: str = "u1") -> None:
    await sm.start(rid, user, "router")
    claim = await claim_next(sm, "router", "w")
    park = FailRequest(action=FailAction.PARK, error_class=budgets.BUDGET_ERROR,
                       error_message="spent", delay_ms=3_600_000)  # fmt: skip
    assert (await sm.fail(claim, park)).code == RC.OK


async def test_unpark_wakes_only_the_users_budget_parked_sagas(
    sm: StateMachine, keys: Keys, redis: Any
) -> None:
    """u1's budget-parked saga goes back to the ready stream now (history 'promoted' with
    the reason); u1's ordinary retry and u2's budget-parked saga stay waiting."""
    await _budget_parked(sm, "b1")
    await _budget_parked(sm, "b2", user="u2")
    await sm.start("r1", "u1", "router")
    retry = FailRequest(action=FailAction.RETRY, error_class="E", error_message="m",
                        delay_ms=3_600_000)  # fmt: skip
    await sm.fail(await claim_next(sm, "router", "w"), retry)
    assert await budgets.unpark_user(sm, "u1", "budget raised") == 1
    assert (await saga_hash(redis, keys, "b1"))["state"] == SagaState.PENDING
    assert (await events(redis, keys, "b1"))[-1] == "promoted"
    for rid in ("b2", "r1"):
        assert (await saga_hash(redis, keys, rid))["state"] == SagaState.WAITING_RETRY
    assert await redis.zscore(keys.delayed(0, "router"), "b1") is None
    # Again: nothing left to wake (the script re-checks each candidate).
    assert await budgets.unpark_user(sm, "u1", "budget raised") == 0
    claim = await claim_next(sm, "router", "w")
    assert claim.record_id == "b1" and claim.attempt == 1


async def test_unpark_wakes_the_users_parked_sagas_of_every_type(
    sm: StateMachine, keys: Keys, redis: Any
) -> None:
    """A budget is the user's, whichever saga type spent it: raising it from a client of
    one type wakes the user's budget-parked sagas of every registered type."""
    from saga.state.streams import ensure_groups
    from saga.state.types import TypeInfo, register_type

    orders = StateMachine(redis, keys.of_type("orders"))
    await ensure_groups(redis, orders.keys, ["router"])
    await register_type(redis, orders.keys, TypeInfo(name="orders", steps=("router",)))
    await _budget_parked(sm, "d1")
    await _budget_parked(orders, "o1")
    assert await budgets.unpark_user(orders, "u1", "budget raised") == 2
    assert (await saga_hash(redis, keys, "d1"))["state"] == SagaState.PENDING
    assert (await saga_hash(redis, orders.keys, "o1"))["state"] == SagaState.PENDING
    await _budget_parked(sm, "d2")
    assert await budgets.unpark_user(sm, "u1", "budget cleared") == 1  # and the other way
    assert (await saga_hash(redis, keys, "d2"))["state"] == SagaState.PENDING


async def test_unpark_wakes_an_undo_parked_for_the_budget(
    sm: StateMachine, keys: Keys, redis: Any
) -> None:
    """A compensation's undo that hit the user's budget is parked ('pec' holds why, its
    'ec' keeps the compensation's cause): raising the budget sends it back to the undo's
    ready stream now, the saga still compensating; an undo waiting on an ordinary retry
    stays waiting."""
    from saga.state.streams import ensure_groups
    from tests.state.test_compensation import UNDOABLE, _claim_undo, _commit, _dead

    await ensure_groups(redis, keys, [f"undo:{s}" for s in UNDOABLE])
    for rid in ("c1", "c2"):
        await sm.start(rid, "u1", "router")
        await _commit(sm, "router")
        await _dead(sm, "parser")
    park = FailRequest(action=FailAction.PARK, error_class=budgets.BUDGET_ERROR,
                       error_message="spent", delay_ms=3_600_000)  # fmt: skip
    retry = FailRequest(action=FailAction.RETRY, error_class=budgets.BUDGET_ERROR,
                        error_message="spent", delay_ms=3_600_000)  # fmt: skip
    parked, waiting = await _claim_undo(sm, "router"), await _claim_undo(sm, "router")
    assert (await sm.fail(parked, park)).state == SagaState.COMPENSATING
    assert (await sm.fail(waiting, retry)).state == SagaState.COMPENSATING
    h = await saga_hash(redis, keys, parked.record_id)
    assert (h["pec"], h["ec"]) == (budgets.BUDGET_ERROR, "E")
    counted = await budgets.parked_counts(redis, keys)  # from the active index
    assert counted.by_user == {"u1": {"documents": 1}}
    assert await budgets.unpark_user(sm, "u1", "budget raised") == 1
    h = await saga_hash(redis, keys, parked.record_id)
    assert (h["state"], h["step"], h["pec"], h["due"]) == ("compensating", "undo:router", "", "0")
    assert h["entry"] and (await events(redis, keys, parked.record_id))[-1] == "promoted"
    assert await redis.zscore(keys.delayed(0, "undo:router"), parked.record_id) is None
    assert await redis.zscore(keys.delayed(0, "undo:router"), waiting.record_id) is not None
    assert await budgets.unpark_user(sm, "u1", "budget raised") == 0
    again = await _claim_undo(sm, "router")
    assert again.record_id == parked.record_id
    done = await sm.commit(again, CommitRequest(output=b"{}", worker="w-u"))
    assert done.state == "compensated"


@pytest.mark.parametrize(
    ("state", "ec", "pec", "expected"),
    [
        (SagaState.WAITING_RETRY, budgets.BUDGET_ERROR, "", True),
        (SagaState.WAITING_RETRY, "CircuitOpenError", "", False),
        (SagaState.COMPENSATING, "E", budgets.BUDGET_ERROR, True),
        (SagaState.COMPENSATING, budgets.BUDGET_ERROR, "", False),
        (SagaState.PENDING, budgets.BUDGET_ERROR, budgets.BUDGET_ERROR, False),
    ],
)
def test_parked_for_budget(state: str, ec: str, pec: str, expected: bool) -> None:
    """A waiting step parks by its 'ec'; an undo of a compensating saga by its 'pec'."""
    assert budgets.parked_for_budget(state, ec, pec) is expected


async def test_parked_counts_per_user_and_type_read_a_bounded_number(
    sm: StateMachine, keys: Keys, redis: Any
) -> None:
    """Budget-parked sagas are counted per user and saga type (an ordinary retry is not);
    with fewer reads allowed than sagas wait, the counts say they are lower bounds."""
    from saga.state.streams import ensure_groups
    from saga.state.types import TypeInfo, register_type

    orders = StateMachine(redis, keys.of_type("orders"))
    await ensure_groups(redis, orders.keys, ["router"])
    await register_type(redis, orders.keys, TypeInfo(name="orders", steps=("router",)))
    await _budget_parked(sm, "d1")
    await _budget_parked(sm, "d2", user="u2")
    await _budget_parked(orders, "o1")
    await sm.start("r1", "u1", "router")
    retry = FailRequest(action=FailAction.RETRY, error_class="E", error_message="m",
                        delay_ms=3_600_000)  # fmt: skip
    await sm.fail(await claim_next(sm, "router", "w"), retry)
    found = await budgets.parked_counts(redis, keys)
    assert found.by_user == {"u1": {"documents": 1, "orders": 1}, "u2": {"documents": 1}}
    assert (found.complete, found.read) == (True, 4)
    few = await budgets.parked_counts(redis, keys, most=4)  # one per index: 3 wait in one
    assert (few.complete, few.read) == (False, 2)
    assert sum(n for per in few.by_user.values() for n in per.values()) <= 2


async def test_set_and_wake_wakes_only_when_the_new_budget_is_not_spent(
    sm: StateMachine, keys: Keys, redis: Any
) -> None:
    """``saga budget set``'s function: a budget below the spend wakes nothing; clearing
    wakes the parked saga and says the user had a budget."""
    await sm.start("s1", "u1", "router")
    spent = FailRequest(action=FailAction.PARK, error_class=budgets.BUDGET_ERROR,
                        error_message="spent", delay_ms=3_600_000, cost=2.0)  # fmt: skip
    await sm.fail(await claim_next(sm, "router", "w"), spent)
    status, woken = await budgets.set_and_wake(sm, "u1", Budget(daily=1.0))
    assert (status.exceeded, status.spent_today_usd, woken) == ("daily", 2.0, 0)
    assert (await saga_hash(redis, keys, "s1"))["state"] == SagaState.WAITING_RETRY
    assert await budgets.clear_and_wake(sm, "u1") == (True, 1)
    assert (await saga_hash(redis, keys, "s1"))["state"] == SagaState.PENDING
    assert await budgets.clear_and_wake(sm, "u1") == (False, 0)


async def test_unpark_reads_a_long_history_a_page_at_a_time(
    sm: StateMachine, keys: Keys, redis: Any
) -> None:
    """A user with more sagas than a page (500) of the user's index: the parked saga
    among the last is found and woken."""
    for i in range(620):
        await sm.start(f"h{i:04d}", "u1", "router")
    await redis.delete(keys.ready(0, "router"))  # those wait forever: only the parked one runs
    await redis.xgroup_create(keys.ready(0, "router"), "executors", id="0", mkstream=True)
    await _budget_parked(sm, "zz-last")
    assert await redis.zrank(keys.user_index(0, "u1"), "zz-last") >= 500
    assert await budgets.unpark_user(sm, "u1", "budget raised") == 1
    assert (await saga_hash(redis, keys, "zz-last"))["state"] == SagaState.PENDING
