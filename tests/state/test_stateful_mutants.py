"""The stateful test's rules and invariants catch a broken compensation, a broken
commit batch or a broken retention: each mutant script (undos in pipeline order instead
of reverse; an undone step left standing, so a resumed compensation undoes it twice; a
batch whose second attempt reads the first one's keys; a batch that counts its commits
once; a sweep that leaves a deleted saga's dead letter; a cancel or a dead letter that
starts no retention) fails a short scripted run of the same machine that passes with the
real scripts."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from redis.exceptions import ResponseError

import tests.state.stateful_harness as harness
import tests.state.test_stateful as stateful
from saga.state.model import FailAction, SagaState
from tests.state.mutants import mutated

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
RETENTION_MUTANTS = {
    "dead letter outlives its saga": (
        "prune_retired.lua",
        "if s[4] and s[4] ~= '' then redis.call('XDEL', dead, s[4]) end",
        "",
    ),
    "cancelled kept forever": (
        "cancel_saga.lua",
        "retire({saga = saga, retired = KEYS[14]}, s[7], record, now, ARGV[6], STATE.CANCELLED)",
        "",
    ),
    "dead letter kept forever": (
        "includes/dead_letter.lua",
        "retire({saga = k.saga, retired = k.retired}, f.user, f.record, f.now, f.ret, to)",
        "",
    ),
}
REVIEW_MUTANTS = {
    "no version check": (
        "decide_review.lua",
        "if version ~= tonumber(ARGV[4]) then return {RC.CONFLICT, version} end",
        "",
    ),
    "flag kept at completion": (
        "decide_review.lua",
        "  redis.call('HDEL', saga, 'rv:' .. step)\n",
        "",
    ),
}
LIFECYCLE_MUTANTS = {
    "imported without its state index": (
        "import_record.lua",
        "score(KEYS[5], ARGV[5], record)",
        "",
    ),
    "imported without its retention": (
        "import_record.lua",
        "score(KEYS[7], ARGV[7], user .. '|' .. record)",
        "",
    ),
}
BATCH_MUTANTS = {
    "cap keys not skipped": (
        "commit_steps.lua",
        "if cap_lease > 0 then first_cost = b + 7 end  -- and the cap's two keys",
        "",
    ),
    "one count per batch": (
        "commit_steps.lua",
        "redis.call('HINCRBY', KEYS[1], 'committed:' .. step, committed[step])",
        "redis.call('HINCRBY', KEYS[1], 'committed:' .. step, 1)",
    ),
}

LEFT_TOKEN_MUTANTS = {  # a commit to the next step leaves its token in the hash
    "a committed attempt's heartbeat is taken": (
        "extend_lease.lua",
        "if not lane and ((s[1] ~= STATE.RUNNING and s[1] ~= STATE.COMPENSATING) or s[2] ~= token)",
        "if not lane and (s[2] ~= token)",
    ),
    "a completed saga keeps its last token": (
        "commit_steps.lua",
        "if state == STATE.RUNNING or state == STATE.COMPLETED then",
        "if state == STATE.RUNNING then",
    ),
}

CLAIM_READ_MUTANTS = {  # claim_steps claiming in the read (state/claim_read.py)
    "reads one more than asked": (
        "includes/claim_read.lua",
        "'COUNT', want, 'STREAMS'",
        "'COUNT', want + 1, 'STREAMS'",
    ),
    "reads its own pending entries again": (
        "includes/claim_read.lua",
        "'STREAMS', ready,\n                         '>')",
        "'STREAMS', ready,\n                         '0')",
    ),
    "names the sagas' keys wrong": (
        "includes/claim_read.lua",
        "base .. ':saga:' .. rid",
        "base .. ':sagas:' .. rid",
    ),
}


@pytest.fixture
def quiet_events(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(harness, "event", lambda *_: None)  # every rule module's: no hypothesis run


@pytest.fixture
def mutant(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    name = request.param
    mutants = {**MUTANTS, **BATCH_MUTANTS, **RETENTION_MUTANTS, **REVIEW_MUTANTS,
               **LIFECYCLE_MUTANTS, **LEFT_TOKEN_MUTANTS, **CLAIM_READ_MUTANTS}  # fmt: skip
    yield from mutated(monkeypatch, mutants, name)


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


def _batch_scenario(m: stateful.SagaMachine) -> None:
    """Three sagas' routers claimed (the per-user cap on), then committed in one batch."""
    m.start_some({"r0", "r1", "r2"})
    held = m.claim_ready("w-a")
    claims = list(getattr(held, "values", held))
    assert len(claims) >= 2, claims
    m.commit_together(claims, resend=False)
    m.redis_agrees_with_model_and_invariants_hold()


@pytest.mark.parametrize("mutant", ["", *BATCH_MUTANTS], indirect=True)
def test_a_broken_commit_batch_is_caught(redis_url: str, quiet_events: None, mutant: str) -> None:
    """The real commit_steps passes; each mutant fails a rule's or an invariant's check."""
    m = stateful.SagaMachine(redis_url)
    try:
        if not mutant:
            _batch_scenario(m)
            return
        with pytest.raises((AssertionError, ResponseError)):  # a misread key: WRONGTYPE
            _batch_scenario(m)
    finally:
        m.teardown()


def _retention_scenario(m: stateful.SagaMachine) -> None:
    """r0 dead-letters at the router and r1 is cancelled: each ends with its retention,
    and the sweep deletes each with its dead letter."""
    m.start_some({"r0", "r1"})
    m.cancel("r1")
    m.redis_agrees_with_model_and_invariants_hold()
    m.work("w-a", FailAction.DEAD, undos=False)  # r0: nothing to undo, a dead letter
    assert m.model["r0"].state == SagaState.FAILED
    m.redis_agrees_with_model_and_invariants_hold()
    m.prune("r0")
    m.redis_agrees_with_model_and_invariants_hold()
    m.prune("r1")
    m.redis_agrees_with_model_and_invariants_hold()
    assert m.model["r0"].gone and m.model["r1"].gone


@pytest.mark.parametrize("mutant", ["", *RETENTION_MUTANTS], indirect=True)
def test_a_broken_retention_is_caught(redis_url: str, quiet_events: None, mutant: str) -> None:
    """The real scripts pass; each mutant fails an invariant's or the prune rule's check."""
    m = stateful.SagaMachine(redis_url)
    try:
        if not mutant:
            _retention_scenario(m)
            return
        with pytest.raises(AssertionError):
            _retention_scenario(m)
    finally:
        m.teardown()


def _lifecycle_scenario(m: stateful.SagaMachine) -> None:
    """r1 is cancelled (its retention running), r0 waits at its first step; each is
    exported and imported back, and r0 then runs to its end from its queue entry."""
    m.start_some({"r0", "r1"})
    m.cancel("r1")
    for rid in ("r0", "r1"):
        m.export_and_import(rid)
        m.redis_agrees_with_model_and_invariants_hold()
    m.work("w-a", None, undos=False)
    m.redis_agrees_with_model_and_invariants_hold()
    assert (m.model["r0"].state, m.model["r1"].state) == (
        SagaState.COMPLETED,
        SagaState.CANCELLED,
    )


@pytest.mark.parametrize("mutant", ["", *LIFECYCLE_MUTANTS], indirect=True)
def test_a_broken_import_is_caught(redis_url: str, quiet_events: None, mutant: str) -> None:
    """The real import passes; each mutant fails an invariant."""
    m = stateful.SagaMachine(redis_url)
    try:
        if not mutant:
            _lifecycle_scenario(m)
            return
        with pytest.raises(AssertionError):
            _lifecycle_scenario(m)
    finally:
        m.teardown()


def _review_scenario(m: stateful.SagaMachine) -> None:
    """The router's commit flags the saga; once completed, one decision at the version
    read, one at a stale version (refused), and the completing one, which re-runs the
    parser in a new epoch."""
    m.start_some({"r0"})
    held = m.claim_ready("w-a")
    (claim,) = list(getattr(held, "values", held))
    m.commit(claim, resend=False, review="doubtful", wrong_next=False)
    m.work("w-a", None, undos=False)  # parser: completed, needs review
    m.decide_review("r0", "router", stale=False, complete=False, resend=True)
    m.redis_agrees_with_model_and_invariants_hold()
    m.decide_review("r0", "router", stale=True, complete=True, resend=False)
    m.redis_agrees_with_model_and_invariants_hold()
    m.decide_review("r0", "router", stale=False, complete=True, resend=False)
    m.redis_agrees_with_model_and_invariants_hold()
    m.work("w-a", None, undos=False)  # the parser re-runs on the reviewed output
    m.redis_agrees_with_model_and_invariants_hold()
    assert m.model["r0"].state == SagaState.COMPLETED and not m.model["r0"].review


@pytest.mark.parametrize("mutant", ["", *REVIEW_MUTANTS], indirect=True)
def test_a_broken_review_decision_is_caught(
    redis_url: str, quiet_events: None, mutant: str
) -> None:
    """The real decide_review passes; without its version check a stale decision lands
    (the rule expects a conflict); a flag kept at completion fails the review invariant."""
    m = stateful.SagaMachine(redis_url)
    try:
        if not mutant:
            _review_scenario(m)
            return
        with pytest.raises((AssertionError, pytest.fail.Exception)):
            _review_scenario(m)
    finally:
        m.teardown()


def _left_token_scenario(m: stateful.SagaMachine) -> None:
    """The router's commit leaves its token in the hash (commit_steps); that attempt's
    heartbeat is refused all the same (the saga no longer runs), and the parser's commit,
    the last, clears the token."""
    m.start_some({"r0"})
    held = m.claim_ready("w-a")
    (claim,) = list(getattr(held, "values", held))
    m.commit(claim, resend=False, review="", wrong_next=False)
    m.heartbeat(claim)  # the rule expects a refusal: the attempt is committed
    m.redis_agrees_with_model_and_invariants_hold()
    m.work("w-a", None, undos=False)  # parser: completed
    m.redis_agrees_with_model_and_invariants_hold()
    assert m.model["r0"].state == SagaState.COMPLETED


@pytest.mark.parametrize("mutant", ["", *LEFT_TOKEN_MUTANTS], indirect=True)
def test_a_left_token_is_never_live(redis_url: str, quiet_events: None, mutant: str) -> None:
    """The real scripts pass; a heartbeat that trusts the token without the state is taken
    (the rule expects a refusal), and a completion that keeps the token fails the model."""
    m = stateful.SagaMachine(redis_url)
    try:
        if not mutant:
            _left_token_scenario(m)
            return
        with pytest.raises(AssertionError):
            _left_token_scenario(m)
    finally:
        m.teardown()


def _claim_read_scenario(m: stateful.SagaMachine) -> None:
    """Three sagas at the router, claimed in the read one at a time."""
    m.start_some({"r0", "r1", "r2"})
    for _ in range(2):
        m.claim_in_read("w-a", 1, capped=False, compensable=False)
        m.redis_agrees_with_model_and_invariants_hold()


@pytest.mark.parametrize("mutant", ["", *CLAIM_READ_MUTANTS], indirect=True)
def test_a_broken_claim_in_read_is_caught(redis_url: str, quiet_events: None, mutant: str) -> None:
    """The real claim_steps passes; each mutant fails the rule's or an invariant's check."""
    m = stateful.SagaMachine(redis_url)
    try:
        if not mutant:
            _claim_read_scenario(m)
            return
        with pytest.raises(AssertionError):
            _claim_read_scenario(m)
    finally:
        m.teardown()
