"""The stateful test's rules and invariants catch a broken compensation: each mutant
script (undos in pipeline order instead of reverse; an undone step left standing, so a
resumed compensation undoes it twice) fails a short scripted run of the same machine
that passes with the real scripts."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import tests.state.test_stateful as stateful
from saga.state import scripts
from saga.state.model import FailAction

MUTANTS = {
    "pipeline order": (
        "includes/undo_plan.lua",
        "plan[#plan + 1] = name",
        "table.insert(plan, 1, name)",
    ),
    "undo twice": (
        "commit_undo.lua",
        "redis.call('HDEL', saga, 'out:' .. undone)",
        "",
    ),
}


@pytest.fixture
def quiet_events(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stateful, "event", lambda *_: None)  # no hypothesis run here


@pytest.fixture
def mutant(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    name = request.param
    if name:
        path, old, new = MUTANTS[name]
        real = scripts._read

        def read(p: str) -> str:
            text = real(p)
            if p == path:
                assert old in text, f"{path} no longer holds {old!r}: update the mutant"
                text = text.replace(old, new)
            return text

        monkeypatch.setattr(scripts, "_read", read)
    scripts.load_all.cache_clear()
    yield name
    scripts.load_all.cache_clear()


def _scenario(m: stateful.SagaMachine) -> None:
    """Both steps commit, the parser re-runs and fails for good: parser's undo, then the
    router's fails for good, and a retry of the compensation resumes with the router."""
    m.start_some({"r0"})
    m.work("w-a", None, undos=False)  # router
    m.work("w-a", None, undos=False)  # parser: completed
    m.retry("r0", "parser", force=False, resend=False)
    m.work("w-a", FailAction.DEAD, undos=False)  # compensating: undo:parser first
    m.redis_agrees_with_model_and_invariants_hold()
    m.work("w-a", None, undos=True)  # parser undone
    m.redis_agrees_with_model_and_invariants_hold()
    m.work("w-a", FailAction.DEAD, undos=True)  # the router's undo fails for good
    m.redis_agrees_with_model_and_invariants_hold()
    m.compensate("r0", resend=False)  # saga retry: the router's undo again, only it
    m.work("w-a", None, undos=True)
    m.redis_agrees_with_model_and_invariants_hold()
    assert m.model["r0"].state == stateful.CD


@pytest.mark.parametrize("mutant", ["", *MUTANTS], indirect=True)
def test_a_broken_compensation_is_caught(redis_url: str, quiet_events: None, mutant: str) -> None:
    """The real scripts pass the scenario; every mutant fails a rule's or an invariant's check."""
    m = stateful.SagaMachine(redis_url)
    try:
        if not mutant:
            _scenario(m)
            return
        with pytest.raises(AssertionError):
            _scenario(m)
    finally:
        m.teardown()
