"""Review flags: a commit flags its saga, a retry clears the flags of the steps it
re-runs, accept_review clears them all; every return code of accept_review."""

from __future__ import annotations

import pytest

from saga.state import operator
from saga.state.errors import SagaNotFoundError, StepConflictError
from saga.state.keys import Keys
from saga.state.machine import StateMachine
from saga.state.model import SagaState
from saga.state.reads import get_saga, get_saga_and_history
from saga.state.requests import CommitRequest
from saga.state.retention import prune_retired
from tests.state.helpers import NEXT, STEPS, claim_next, snapshot

pytestmark = pytest.mark.anyio


async def _run(sm: StateMachine, rid: str, reviews: dict[str, str]) -> None:
    """Start ``rid`` and commit every step, each with its review reason from ``reviews``."""
    await sm.start(rid, "u1", "router")
    for step in STEPS:
        c = await claim_next(sm, step, "w-a")
        req = CommitRequest(output=b"{}", next_step=NEXT[step], review=reviews.get(step, ""))
        await sm.commit(c, req)


async def _flagged(sm: StateMachine, keys: Keys) -> list[str]:
    return [m.decode() for m in await sm.client.zrange(keys.review_index(0), 0, -1)]


async def test_commit_with_a_review_flags_the_saga_and_it_completes_flagged(
    sm: StateMachine, keys: Keys
) -> None:
    """A reason on a commit is kept per step, indexed, in history and counted; the saga
    still completes ("completed, needs review")."""
    await _run(sm, "r1", {"parser": "coverage 40% under 80%"})
    await _run(sm, "r2", {})
    saga, events = await get_saga_and_history(sm.client, keys, "r1")
    assert (saga.state, saga.review, saga.needs_review) == (
        SagaState.COMPLETED,
        {"parser": "coverage 40% under 80%"},
        True,
    )
    assert [e.review for e in events if e.step == "parser"] == ["coverage 40% under 80%"]
    assert await _flagged(sm, keys) == ["r1"]
    assert (await get_saga(sm.client, keys, "r2")).review == {}
    assert await sm.client.hget(keys.stats(0), "review:parser") == b"1"


async def test_retry_clears_the_flags_of_the_steps_it_reruns_only(
    sm: StateMachine, keys: Keys
) -> None:
    """A retry from the grouper keeps the parser's flag; from the parser it clears it."""
    await _run(sm, "r1", {"parser": "p", "grouper": "g"})
    await operator.retry(sm, "r1", "grouper", "parser", steps=STEPS)
    assert (await get_saga(sm.client, keys, "r1")).review == {"parser": "p"}
    assert await _flagged(sm, keys) == ["r1"]
    await operator.retry(sm, "r1", "parser", "router", steps=STEPS, force=True)
    assert (await get_saga(sm.client, keys, "r1")).review == {}
    assert await _flagged(sm, keys) == []


async def test_retry_without_the_pipeline_changes_no_flag(sm: StateMachine, keys: Keys) -> None:
    """A caller that does not name the pipeline's steps leaves every flag as it was."""
    await _run(sm, "r1", {"parser": "p"})
    await operator.retry(sm, "r1", "parser", "router")
    assert (await get_saga(sm.client, keys, "r1")).review == {"parser": "p"}
    assert await _flagged(sm, keys) == ["r1"]


async def test_accept_review_clears_every_flag_and_records_who(
    sm: StateMachine, keys: Keys
) -> None:
    """Accepting clears all flags, leaves the index, keeps the state, records the actor;
    a resend with the same op id is answered from the record and writes nothing."""
    await _run(sm, "r1", {"parser": "p", "grouper": "g"})
    assert await operator.accept_review(sm, "r1", STEPS, actor="dr. who", op="op-1") == 2
    saga, events = await get_saga_and_history(sm.client, keys, "r1")
    assert (saga.state, saga.review) == (SagaState.COMPLETED, {})
    assert (events[-1].event, events[-1].detail) == ("reviewed", "dr. who")
    assert await _flagged(sm, keys) == []
    before = await snapshot(sm.client, keys.prefix)
    assert await operator.accept_review(sm, "r1", STEPS, actor="dr. who", op="op-1") == 2
    assert await snapshot(sm.client, keys.prefix) == before


async def test_accept_review_refuses_an_unflagged_or_missing_saga(
    sm: StateMachine, keys: Keys
) -> None:
    """NOT_FOUND and WRONG_STATE (not flagged) raise and write nothing."""
    await _run(sm, "r1", {})
    before = await snapshot(sm.client, keys.prefix)
    with pytest.raises(StepConflictError, match="not flagged"):
        await operator.accept_review(sm, "r1", STEPS)
    with pytest.raises(SagaNotFoundError):
        await operator.accept_review(sm, "nope", STEPS)
    assert await snapshot(sm.client, keys.prefix) == before


async def test_prune_retired_drops_the_review_index_entry(sm: StateMachine, keys: Keys) -> None:
    """When a flagged completed saga's retention ends, its review index entry goes too."""
    await _run(sm, "r1", {"parser": "p"})
    await sm.client.delete(keys.saga("r1"))  # the retention expired
    await sm.client.zadd(keys.retired(0), {"u1|r1": 0})
    assert await prune_retired(sm, 0) == 1
    assert await _flagged(sm, keys) == []
