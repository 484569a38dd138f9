"""Branches and their join hold against the model of tests/state/stateful_branches.py
(random interleavings of lane claims, commits, failures, retries, heartbeats, requeues,
cancels and operator retries), and each mutant of a lane script is caught by a short
scenario that the real scripts pass."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import run_state_machine_as_test

from saga.state.model import Claim
from tests.state.mutants import mutated
from tests.state.stateful_branches import BranchMachine

SOAK = os.environ.get("SAGA_SOAK", "").lower() in ("1", "true", "yes")
SETTINGS = settings(
    max_examples=300 if SOAK else 60, stateful_step_count=60 if SOAK else 40, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)  # fmt: skip
"""``SAGA_SOAK=1`` runs more examples, each longer."""


def test_branches_hold_against_the_model(redis_url: str) -> None:
    """Random interleavings of lane claims, commits, failures, retries and cancels keep
    the model's word: the join fires once, only on both lanes' commits of one epoch."""
    run_state_machine_as_test(lambda: BranchMachine(redis_url), settings=SETTINGS)  # type: ignore[arg-type]


MUTANTS = {
    "the join fires before its last parent": (
        "includes/lanes.lua",
        "if not d or string.match(d, '^(%d+):') ~= c.epoch then",
        "if false then",
    ),
    "the join counts a parent's commit of an earlier epoch": (
        "includes/lanes.lua",
        "if not d or string.match(d, '^(%d+):') ~= c.epoch then",
        "if not d then",
    ),
    "a zombie lane's commit is taken": (
        "commit_steps.lua",
        "and s[12] == STATE.RUNNING and s[3] == token",
        "and s[12] == STATE.RUNNING",
    ),
    "a lane of a cancelled saga is claimed": (
        "includes/claim_lane.lua",
        "local live = lane_live(s[3], s[4], s[5])",
        "local live = true",
    ),
    "a lane's retry stops the whole saga": (
        "fail_step.lua",
        "if lane then  -- the saga runs on (its other lanes); this lane waits for its retry",
        "if false then",
    ),
    "a cancelled saga's lane heartbeat extends its lease": (
        "extend_lease.lua",
        "s[5] == token and lane_live(s[1], s[3], s[4])",
        "s[5] == token",
    ),
    "a cancelled saga's lane retry is promoted": (
        "promote_retries.lua",
        "if s[6] == STATE.WAITING_RETRY and lane_live(s[1], s[5], s[3]) then",
        "if s[6] == STATE.WAITING_RETRY then",
    ),
    "a fork leaves its attempt's token to the running saga": (
        "commit_steps.lua",
        "if state == STATE.RUNNING or state == STATE.COMPLETED then",
        "if state == STATE.COMPLETED then",
    ),
    "the requeue drops a running lane's entry": (
        "requeue_idle.lua",
        "local lane = s[11] == entry and lane_live(s[2], s[9], s[6])",
        "local lane = false",
    ),
}


@pytest.fixture
def mutant(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    yield from mutated(monkeypatch, MUTANTS, request.param)


def _lane(m: BranchMachine, step: str) -> Claim:
    c = m.claim_lane(step)
    assert c is not None
    return c


def _scenario(m: BranchMachine, name: str) -> None:
    """The short run that shows the mutant ``name`` (or passes with the real scripts)."""
    m.start("r0")
    m.fork()
    a = _lane(m, "a")
    m.redis_agrees_with_the_model()
    if name in ("a lane of a cancelled saga is claimed",
                "a cancelled saga's lane heartbeat extends its lease"):  # fmt: skip
        m.cancel("r0")
        m.heartbeat(a)
        m.claim_lane("b")
        return
    if name == "a cancelled saga's lane retry is promoted":
        b = _lane(m, "b")  # (cancel drops the retry of the saga's step, a)
        m.fail(b, dead=False)
        m.cancel("r0")
        m.promote("b")
        return
    if name == "a zombie lane's commit is taken":
        m.fail(a, dead=False)
        m.promote("a")
        _lane(m, "a")
        m.commit(a)  # the attempt before the retry: fenced
        m.redis_agrees_with_the_model()
        return
    if name == "a lane's retry stops the whole saga":
        m.fail(a, dead=False)
        m.redis_agrees_with_the_model()
        m.promote("a")
        a = _lane(m, "a")
    if name == "the requeue drops a running lane's entry":
        m.requeue("a")
    m.commit(a)  # the first parent: no join yet
    m.redis_agrees_with_the_model()
    m.commit(a)  # re-sent: a duplicate
    b = _lane(m, "b")
    m.commit(b)  # the last parent: the join fires
    m.redis_agrees_with_the_model()
    if name == "the join counts a parent's commit of an earlier epoch":
        m.cancel("r0")
        m.retry("r0")
        m.fork()
        _lane(m, "a")
        m.commit(a)  # the zombie of the epoch before
        m.redis_agrees_with_the_model()
        m.commit(_lane(m, "b"))  # b first this time: a has not committed in this epoch
        m.redis_agrees_with_the_model()
        return
    m.join()
    m.redis_agrees_with_the_model()


@pytest.mark.parametrize("mutant", list(MUTANTS), indirect=True)
def test_each_mutant_is_caught(redis_url: str, mutant: str) -> None:
    """The real scripts pass each scenario; on its mutant, a rule's or the invariant's
    check fails."""
    with _machine(redis_url) as m, pytest.raises(AssertionError):
        _scenario(m, mutant)


@pytest.mark.parametrize("name", list(MUTANTS))
def test_each_scenario_passes_with_the_real_scripts(redis_url: str, name: str) -> None:
    """The scenarios the mutants fail hold with the real scripts."""
    with _machine(redis_url) as m:
        _scenario(m, name)


@contextlib.contextmanager
def _machine(url: str) -> Iterator[BranchMachine]:
    m = BranchMachine(url)
    try:
        yield m
    finally:
        m.teardown()
