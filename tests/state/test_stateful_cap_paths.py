"""Scripted runs of the stateful machine (test_stateful) through the paths random runs
reach rarely: a cancel, retry or compensation handing a user's slot on at once; a
released entry of an older epoch dropped by the claim, its slot going to the newer
deferral; a capped takeover dead-lettering into compensation; an undo parked for the
budget and woken when it is raised; an older epoch's release requeued (its slot handed
on) or quarantined (its saga left deferred, its slot handed on); a release whose saga
was pruned. The model must follow Redis at each step and the invariants hold."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import tests.state.stateful_harness as harness
import tests.state.test_stateful as stateful
from saga.state.model import Claim, FailAction
from tests.state import stateful_model as model
from tests.state.helpers import read_ready


@pytest.fixture
def m(redis_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[stateful.SagaMachine]:
    monkeypatch.setattr(harness, "event", lambda *_: None)  # every rule module's: no hypothesis run
    machine = stateful.SagaMachine(redis_url)
    machine.start_some(set(stateful.RECORDS))  # r0, r1 of one user, r2 of another
    try:
        yield machine
    finally:
        machine.teardown()


def _claims(got: Any) -> list[tuple[str, Claim]]:
    return list(got.values)


def _check(m: stateful.SagaMachine) -> None:
    m.redis_agrees_with_model_and_invariants_hold()


def _r0_running_r1_deferred(m: stateful.SagaMachine) -> tuple[str, Claim]:
    [held] = _claims(m.claim_capped("w-a", 1))  # r0 takes u-a's slot (r1, r2 behind)
    assert held[1].record_id == "r0"
    assert _claims(m.claim_capped("w-a", 1)) == []  # r1 deferred: r2 waits behind it
    assert m.model["r1"].dfr and m.fair.deferred["router"]
    _check(m)
    return held


@pytest.mark.parametrize("how", ["cancel", "retry", "compensate"])
def test_leaving_the_step_hands_the_slot_on(m: stateful.SagaMachine, how: str) -> None:
    """r0 leaves the router by cancel, forced retry or compensation: r1's deferral is
    released into its slot at once, and then claimed."""
    _r0_running_r1_deferred(m)
    if how == "cancel":
        m.cancel("r0")
    elif how == "retry":
        m.retry("r0", "router", force=True, resend=False)
    else:
        m.compensate("r0", resend=False)
    assert m.fair.deferred["router"] == set()
    _check(m)
    held = _claims(m.claim_ready("w-b"))
    assert "r1" in {c.record_id for _, c in held}
    _check(m)


def test_an_older_epochs_release_is_dropped_for_the_newer(m: stateful.SagaMachine) -> None:
    """r1 deferred in epoch 1, retried and deferred again in epoch 2 (r2's retry entry
    waits behind it); r0's commit releases the epoch-1 deferral: the claim drops it and
    its slot goes to the epoch-2 one, which is then claimed in epoch 2."""
    held = _r0_running_r1_deferred(m)
    m.retry("r1", "router", force=False, resend=False)  # epoch 2, an entry after r2's
    m.retry("r2", "router", force=False, resend=False)  # r2's new entry: behind r1's
    _check(m)
    assert _claims(m.claim_capped("w-a", 1)) == []  # r2's old entry: stale
    assert _claims(m.claim_capped("w-a", 1)) == []  # r1's epoch-2 entry: deferred again
    assert {m_.rsplit("|", 1)[1] for m_ in m.fair.deferred["router"]} == {"1", "2"}
    m.commit(held, resend=False, review="", wrong_next=False)  # releases r1's epoch 1
    _check(m)
    got = _claims(m.claim_capped("w-a", 2))  # r2's entry and r1's epoch-1 release
    assert [c.record_id for _, c in got if c.step == "router"] == ["r2"]
    assert m.fair.deferred["router"] == set()  # the slot went to r1's epoch-2 deferral
    _check(m)
    [r1] = [c for _, c in _claims(m.claim_ready("w-b")) if c.record_id == "r1"]
    assert (r1.step, r1.epoch) == ("router", 2)
    _check(m)


def test_a_capped_takeover_dead_letters_into_compensation(m: stateful.SagaMachine) -> None:
    """r0's router committed; its parser attempt loses its lease twice (the cap of
    expiries): the capped takeover that would dead-letter it compensates it instead (r1
    and r2, with nothing committed, are dead-lettered)."""
    [router] = [h for h in _claims(m.claim_ready("w-a")) if h[1].record_id == "r0"]
    m.commit(router, resend=False, review="", wrong_next=False)
    [held] = [h for h in _claims(m.claim_capped("w-a", 2)) if h[1].record_id == "r0"]
    assert held[1].step == "parser"
    _check(m)
    m.take_over("w-b", expire_all=True, capped=True, compensable=True)  # expiry 1
    _check(m)
    m.take_over("w-b", expire_all=True, capped=True, compensable=True)  # expiry 2: dead
    assert m.model["r0"].state == stateful.CG and m.model["r0"].step == "undo:router"
    assert held[1].token != m.model["r0"].token
    _check(m)
    m.work("w-a", None, undos=True)
    assert m.model["r0"].state == model.CD
    _check(m)


def test_an_undo_parked_for_the_budget_wakes_when_it_is_raised(m: stateful.SagaMachine) -> None:
    """A completed saga re-run at the parser fails there for good and compensates; its
    undo is claimed and parked for the user's budget; unpark wakes it (the saga still
    compensating), and the compensation runs to its end."""
    for _ in range(4):  # every saga through both steps (the per-user cap holds some back)
        m.work("w-a", None, undos=False)
    assert m.model["r0"].state == model.C
    m.retry("r0", "parser", force=False, resend=False)
    m.work("w-a", FailAction.DEAD, undos=False)  # compensating: undo:parser first
    assert m.model["r0"].state == model.CG
    _check(m)
    [held] = [h for h in _claims(m.claim_ready("w-u")) if h[1].step.startswith("undo:")]
    m.fail(held, FailAction.PARK, due_now=False, resend=False, budget=True,
           compensable=False)  # fmt: skip
    assert m.model["r0"].pec
    _check(m)
    m.unpark(held[1].step)
    assert not m.model["r0"].pec and m.model["r0"].entry
    _check(m)
    for _ in range(3):
        m.work("w-u", None, undos=True)
    assert m.model["r0"].state == model.CD
    _check(m)


def _r1_deferred_in_two_epochs(m: stateful.SagaMachine) -> tuple[str, Claim]:
    """r0 runs the router; r1 deferred in epoch 1, retried and deferred again in epoch 2
    (r2's retry entry behind); r0's commit then releases r1's epoch-1 deferral."""
    held = _r0_running_r1_deferred(m)
    m.retry("r1", "router", force=False, resend=False)
    m.retry("r2", "router", force=False, resend=False)
    assert _claims(m.claim_capped("w-a", 1)) == []  # r2's old entry: stale
    assert _claims(m.claim_capped("w-a", 1)) == []  # r1's epoch-2 entry: deferred again
    m.commit(held, resend=False, review="", wrong_next=False)  # releases r1's epoch 1
    _check(m)
    return held


def test_a_requeued_release_of_an_older_epoch_hands_its_slot_on(m: stateful.SagaMachine) -> None:
    """The router's entries are read and left (their worker died): the controller's
    requeue drops r1's epoch-1 release and hands its slot to r1's epoch-2 deferral at
    once, which is then claimed in epoch 2."""
    _r1_deferred_in_two_epochs(m)
    m.run(read_ready(m.client, m.keys, "router", "w-x", count=10))
    m.requeue(expire_all=False, resend=True)
    assert m.fair.deferred["router"] == set()
    assert set(m.fair.inflight["router"]) == {"u-a|r1"}
    _check(m)
    [r1] = [c for _, c in _claims(m.claim_ready("w-b")) if c.record_id == "r1"]
    assert (r1.step, r1.epoch) == ("router", 2)
    _check(m)


def test_a_quarantined_release_of_an_older_epoch_leaves_its_saga_deferred(
    m: stateful.SagaMachine,
) -> None:
    """Quarantining r1's epoch-1 release (and r2's current entry) fails r2 only; the slot
    reserved for that release goes to r1's epoch-2 deferral at once, which is claimed."""
    _r1_deferred_in_two_epochs(m)
    m.quarantine_ready("router", resend=True)
    assert (m.model["r1"].state, m.model["r1"].entry) == (model.P, "")
    assert m.model["r2"].state == model.F
    assert m.fair.deferred["router"] == set()
    assert set(m.fair.inflight["router"]) == {"u-a|r1"}
    _check(m)
    [r1] = [c for _, c in _claims(m.claim_ready("w-b")) if c.record_id == "r1"]
    assert (r1.step, r1.epoch) == ("router", 2)
    _check(m)


def test_a_release_for_a_pruned_saga_hands_its_slot_on(m: stateful.SagaMachine) -> None:
    """r1, deferred in epoch 1, is retried, runs to completion in epoch 2 and is pruned at
    its retention's end; r0's commit then releases r1's epoch-1 deferral into u-a's slot:
    the capped claim of that entry finds r1's saga gone and frees the slot (found by its
    record: the user went with the hash) instead of holding it for nobody."""
    held = _r0_running_r1_deferred(m)
    m.retry("r1", "router", force=False, resend=False)  # epoch 2: its epoch-1 deferral stays
    for _ in range(2):  # router, then parser, uncapped
        for h in _claims(m.claim_ready("w-b")):
            if h[1].record_id == "r1":
                m.commit(h, resend=False, review="", wrong_next=False)
    assert m.model["r1"].state == model.C
    m.prune("r1")
    assert m.model["r1"].gone
    _check(m)
    m.commit(held, resend=False, review="", wrong_next=False)  # releases r1's epoch 1
    assert "u-a|r1" in m.fair.inflight["router"]
    _check(m)
    m.claim_capped("w-a", 2)  # r1's release: NOT_FOUND, its slot freed
    assert "u-a|r1" not in m.fair.inflight["router"]
    _check(m)
