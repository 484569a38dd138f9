"""Scripted runs of the stateful machine (test_stateful) through budget holds: reserve,
settle in the commit or fail, take-over by a re-run, lapse. The real scripts pass each;
each mutant fails a rule's or the holds invariant's check:

- "settles twice": a released hold's field is left behind, so the next attempt's call
  of the same id finds it, holds nothing, and its settle releases the hold again;
- "lapses a live hold": the sweep releases a hold whose attempt still runs;
- "no budget check": a hold past the budget is made.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import tests.state.stateful_harness as harness
import tests.state.test_stateful as stateful
from saga.state.model import Claim, FailAction
from tests.state.mutants import mutated

MUTANTS = {
    "settles twice": ("includes/holds.lua", "  redis.call('HDEL', h.holds, id)\n", ""),
    "lapses a live hold": (
        "lapse_holds.lua",
        "if live and token ~= '' and s[2] == token and lease > now then",
        "if false then",
    ),
    "no budget check": (
        "reserve_budget.lua",
        "if l[2] and (l[4] >= l[2] or l[4] + amount > l[2] + 1e-12) then",
        "if false then",
    ),
}


@pytest.fixture
def mutant(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    monkeypatch.setattr(harness, "event", lambda *_: None)  # a scripted run, not hypothesis
    yield from mutated(monkeypatch, MUTANTS, request.param)


def _claims(got: Any) -> list[tuple[str, Claim]]:
    return list(getattr(got, "values", got))


def _check(m: stateful.SagaMachine) -> None:
    m.redis_agrees_with_model_and_invariants_hold()
    m.holds_agree_with_the_model()


def _settle_then_rerun(m: stateful.SagaMachine) -> None:
    """r0's attempt holds a call, parks (its fail settles the hold), runs again and makes
    the same call (the same id): a new hold, settled by the commit."""
    m.start_some({"r0"})
    [first] = _claims(m.claim_ready("w-a"))
    m.reserve(first, 0.25, 0)
    _check(m)
    m.fail(first, FailAction.PARK, due_now=True, resend=False, budget=True, compensable=False)
    _check(m)
    m.promote("router", force_due=False)
    [second] = _claims(m.claim_ready("w-a"))
    m.reserve(second, 0.25, 0)
    _check(m)
    m.commit(second, resend=True, review="", wrong_next=False)
    _check(m)
    assert not m.holds and m.spent["u-a"] == 2 * stateful_budget().SETTLE_USD


def _lapse_and_budget(m: stateful.SagaMachine) -> None:
    """Two sagas of one user hold 0.5 each (the whole budget); a third call does not fit.
    The sweep keeps both (live); r0's lease expires and r1 takes nothing: r0's hold lapses."""
    m.start_some({"r0", "r1"})
    helds = _claims(m.claim_ready("w-a"))
    assert len(helds) == 2
    m.reserve(helds[0], 0.5, 0)
    m.reserve(helds[1], 0.5, 0)
    m.reserve(helds[1], 0.125, 1)  # over the budget: refused
    _check(m)
    m.lapse(force_due=True)  # both attempts live: their holds move on
    _check(m)
    m.expire_lease(helds[0][1].record_id)
    m.lapse(force_due=True)  # r0's attempt is gone: its hold lapses
    _check(m)
    assert len(m.holds) == 1


def stateful_budget() -> Any:
    import tests.state.stateful_rules_budget as budget

    return budget


@pytest.mark.parametrize("mutant", ["", *MUTANTS], indirect=True)
def test_a_broken_hold_is_caught(redis_url: str, mutant: str) -> None:
    """The real scripts pass both scenarios; every mutant fails one of them."""
    failures = 0
    for scenario in (_settle_then_rerun, _lapse_and_budget):
        m = stateful.SagaMachine(redis_url)
        try:
            scenario(m)
        except AssertionError:
            if not mutant:
                raise
            failures += 1
        finally:
            m.teardown()
    assert failures > 0 if mutant else failures == 0
