"""A stale undo failure re-sent after a later one (the UndoMapMachine run of seed
142205065108670754241213584894917834251, shrunk by hand): fail_undo answers DUPLICATE only
for the saga's last recorded failure ('failtok'); an earlier attempt's failure, re-sent,
is fenced (LEASE_LOST, one 'fenced' event) and changes nothing else."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from saga.state.codes import RC
from saga.state.model import Claim, FailAction
from saga.state.requests import FailRequest
from tests.state.helpers import history
from tests.state.mutants import mutated
from tests.state.stateful_map_undo import UndoMapMachine

REFAIL_MUTANTS = {
    "a stale undo failure is recorded again": (
        "fail_undo.lua",
        "if s[1] ~= STATE.COMPENSATING or s[2] ~= step or s[3] ~= token then",
        "if s[1] ~= STATE.COMPENSATING and s[1] ~= STATE.COMPENSATION_FAILED then",
    ),
    "every undo failure is a duplicate forever": (
        "fail_undo.lua",
        "if s[9] == token then",
        "if s[9] == token or s[1] == STATE.COMPENSATION_FAILED then",
    ),
}


@pytest.fixture
def refail_mutant(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    yield from mutated(monkeypatch, REFAIL_MUTANTS, request.param)


def _undo(m: UndoMapMachine) -> Claim:
    (u,) = m.undo_claim().values  # type: ignore[attr-defined]
    assert isinstance(u, Claim)
    return u


def _refail(m: UndoMapMachine) -> None:
    """One item committed, j failed for good; the undo fails twice (the operator resumes
    in between), then both failures are re-sent: the first stale, the second a duplicate."""
    m.start("r0", 1)
    m.over()
    m.claim()  # the spawn
    (a,) = m.claim().values  # type: ignore[attr-defined]
    m.commit(a)  # the fan-in: j
    m.join_fails()  # compensating: item 0
    first = _undo(m)
    m.undo_fail(first)  # compensation_failed, failtok = first
    m.compensate("r0")  # resumes: item 0 again
    second = _undo(m)
    m.undo_fail(second)  # compensation_failed, failtok = second
    m.redis_agrees_with_the_model()
    m.each_item_is_undone_once()
    before = m.run(history(m.client, m.keys, "r0"))
    m.undo_fail(first)  # stale: LEASE_LOST (the model before the fix expected DUPLICATE)
    m.undo_fail(second)  # the last failure: DUPLICATE
    m.redis_agrees_with_the_model()
    m.each_item_is_undone_once()
    after = m.run(history(m.client, m.keys, "r0"))
    assert [e["e"] for e in after[len(before) :]] == ["fenced"], after[len(before) :]
    # a direct look at the script's answers, past the model
    req = FailRequest(action=FailAction.DEAD, error_class="Boom", error_message="no")
    assert m.run(m.sm.fail(first, req)).code == RC.LEASE_LOST
    assert m.run(m.sm.fail(second, req)).code == RC.DUPLICATE


def test_a_stale_undo_failure_is_fenced(redis_url: str) -> None:
    m = UndoMapMachine(redis_url)
    try:
        _refail(m)
    finally:
        m.teardown()


@pytest.mark.parametrize("refail_mutant", list(REFAIL_MUTANTS), indirect=True)
def test_each_refail_mutant_is_caught(redis_url: str, refail_mutant: str) -> None:
    """A stale failure applied again, or every failure of a failed compensation taken
    for a duplicate: a rule's check fails."""
    m = UndoMapMachine(redis_url)
    try:
        with pytest.raises(AssertionError):
            _refail(m)
    finally:
        m.teardown()
