"""decide_review: a reviewer's decisions, each a transition with a version check; the
last one completes the review and re-runs the grouper on the reviewed values in a new
epoch, keeping the machine's original; every return code."""

from __future__ import annotations

import msgspec
import pytest

from saga.documents import review
from saga.state.errors import ReviewConflictError, SagaNotFoundError, StepConflictError
from saga.state.keys import Keys
from saga.state.machine import StateMachine
from saga.state.model import SagaState
from saga.state.reads import get_saga_and_history
from saga.state.requests import CommitRequest
from saga.steps.models import Biomarker, Coverage, Extraction, ParserOutput, Provenance, Rejected
from saga.steps.review import Fix, Kind
from tests.state.helpers import NEXT, STEPS, claim_next, snapshot

pytestmark = pytest.mark.anyio

LINE = "Hemoglobin 13.2 g/dL 12.0 - 15.5"
OUT = ParserOutput.of(
    Extraction(
        biomarkers=[
            Biomarker(name="Hemoglobin", value=13.2, value_text="13.2", unit="g/dL",
                      provenance=Provenance(page=1, line=LINE, start=11, end=15)),
            Biomarker(name="Creatinine", value=2.1, value_text="2.1",
                      warnings=["no unit is written next to the value"],
                      provenance=Provenance(page=1, line="Creatinine 2.1", start=11, end=14)),
        ],
        rejected=[Rejected(name="Sodium", value_text="1400", unit="mmol/L",
                           reason="value impossible",
                           provenance=Provenance(page=1, line="Sodium 1400 mmol/L"))],
        coverage=Coverage(candidate_lines=4, explained_lines=3,
                          unexplained=[Provenance(page=1, line="Potassium 4.1 mmol/L")]),
    ),
    review="1 values rejected by the checks",
)  # fmt: skip


async def _flagged_saga(sm: StateMachine, rid: str, complete: bool = True) -> None:
    await sm.start(rid, "u1", "router")
    for step in STEPS if complete else STEPS[:2]:
        c = await claim_next(sm, step, "w-a")
        out = msgspec.json.encode(OUT) if step == "parser" else b"{}"
        req = CommitRequest(
            output=out, next_step=NEXT[step], review=OUT.review if step == "parser" else ""
        )
        await sm.commit(c, req)


async def test_the_last_decision_reruns_the_grouper_on_the_reviewed_values(
    sm: StateMachine, keys: Keys
) -> None:
    """Correct, reject and add: each is in history with its author and old and new value;
    the last one replaces the parser's output, keeps the original, and re-runs the
    grouper in a new epoch."""
    await _flagged_saga(sm, "r1")
    view = await review.load(sm.client, keys, "r1", STEPS)
    assert (view.step, view.undecided, view.version) == ("parser", 3, 0)
    fix = Fix(value="2.1", unit="mg/dL")
    await review.decide(sm, "r1", STEPS, "b1", Kind.CORRECT, actor="console ann", fix=fix)
    await review.decide(sm, "r1", STEPS, "r0", Kind.REJECT, actor="console ann")
    add = Fix(name="Potassium", value="4.1", unit="mmol/L")
    got = await review.decide(sm, "r1", STEPS, "u0", Kind.ADD, actor="console bob", fix=add)
    assert (got.completed, got.rerun, got.version) == (True, "grouper", 3)
    saga, events = await get_saga_and_history(sm.client, keys, "r1")
    assert (saga.state, saga.step, saga.review) == (SagaState.PENDING, "grouper", {})
    out = msgspec.json.decode(saga.outputs["parser"], type=ParserOutput)
    names = {b.name: b for b in out.extraction.biomarkers}
    assert names["Creatinine"].unit == "mg/dL"
    assert names["Creatinine"].reviewed.machine.unit == ""  # type: ignore[union-attr]
    assert names["Potassium"].reviewed.decision == "added"  # type: ignore[union-attr]
    assert [r.name for r in out.extraction.rejected] == ["Sodium"]
    orig = await sm.client.hget(keys.saga("r1"), "orig:parser")
    assert msgspec.json.decode(orig, type=ParserOutput) == OUT
    decided = [e for e in events if e.event == "review_decided"]
    assert [e.detail for e in decided] == [
        "correct b1 by console ann",
        "reject r0 by console ann",
        "add u0 by console bob",
    ]
    assert '"unit":"mg/dL"' in decided[0].review_decision
    assert [e.event for e in events][-1] == "review_completed"
    assert await sm.client.zcard(keys.review_index(0)) == 0
    c = await claim_next(sm, "grouper", "w-a")  # the grouper's input is the reviewed output
    assert msgspec.json.decode(c.input, type=ParserOutput) == out


async def test_a_decision_on_a_stale_version_is_a_conflict_and_writes_nothing(
    sm: StateMachine, keys: Keys
) -> None:
    """Two reviewers read version 0; the second to decide is refused, nothing changes."""
    await _flagged_saga(sm, "r1")
    await review.decide(sm, "r1", STEPS, "r0", Kind.REJECT, actor="a", version=0)
    before = await snapshot(sm.client, keys.prefix)
    with pytest.raises(ReviewConflictError, match="another reviewer"):
        await review.decide(sm, "r1", STEPS, "r0", Kind.ACCEPT, actor="b", version=0)
    assert await snapshot(sm.client, keys.prefix) == before


async def test_a_resent_decision_writes_nothing(sm: StateMachine, keys: Keys) -> None:
    """The same op id again replies DUPLICATE without a second event."""
    await _flagged_saga(sm, "r1")
    await review.decide(sm, "r1", STEPS, "b0", Kind.ACCEPT, actor="a", op="op-1")
    before = await snapshot(sm.client, keys.prefix)
    again = await review.decide(sm, "r1", STEPS, "b0", Kind.ACCEPT, actor="a", op="op-1", version=0)
    assert again.duplicate
    assert await snapshot(sm.client, keys.prefix) == before


async def test_refusals(sm: StateMachine, keys: Keys) -> None:
    """No saga, not flagged, not completed yet, and an impossible decision."""
    with pytest.raises(StepConflictError):
        await review.decide(sm, "nope", STEPS, "b0", Kind.ACCEPT, actor="a")
    await _flagged_saga(sm, "r2", complete=False)
    with pytest.raises(StepConflictError, match="once it completes"):
        await review.decide(sm, "r2", STEPS, "b0", Kind.ACCEPT, actor="a")
    await _flagged_saga(sm, "r3")
    with pytest.raises(ValueError, match="unexplained line"):
        await review.decide(sm, "r3", STEPS, "u0", Kind.ACCEPT, actor="a")
    with pytest.raises(ValueError, match="page and line"):
        await review.decide(
            sm, "r3", STEPS, "new", Kind.ADD, actor="a", fix=Fix(name="K", value="4")
        )
    assert SagaNotFoundError  # the state face's own check is in test_decide_codes


async def test_decide_codes_not_found_and_not_flagged(sm: StateMachine, keys: Keys) -> None:
    """The script's NOT_FOUND and not_flagged replies, called directly."""
    from saga.state import review as store

    d = store.Decision(step="parser", version=0, summary="accept b0", decisions=b"{}", event=b"{}")
    with pytest.raises(SagaNotFoundError):
        await store.decide(sm, "r9", d, actor="a")
    await sm.start("r8", "u1", "router")
    with pytest.raises(StepConflictError, match="no review open"):
        await store.decide(sm, "r8", d, actor="a")
