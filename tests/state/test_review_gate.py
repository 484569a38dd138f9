"""A review gate (park_wait with the gate flag, accept_review, decide_review) against a
real server: router -> parser -> review (the gate) -> publish. An unflagged saga passes
the gate at once; a flagged one waits, holding nothing, until a person accepts it (the
same script moves it on) or a timer takes the gate's path."""

from __future__ import annotations

import msgspec
import pytest

from saga.documents import review
from saga.state import operator, signals
from saga.state.codes import RC
from saga.state.errors import StepConflictError
from saga.state.keys import Keys
from saga.state.machine import StateMachine
from saga.state.model import Claim
from saga.state.requests import CommitRequest
from saga.state.signals import WaitPlan
from saga.state.streams import ensure_groups
from saga.steps.models import Biomarker, Extraction, ParserOutput, Provenance
from saga.steps.review import Kind
from tests.state.helpers import claim_next, events, saga_hash, stream_rows

pytestmark = pytest.mark.anyio

STEPS = ("router", "parser", "review", "publish")
PARSED = ParserOutput.of(
    Extraction(biomarkers=[Biomarker(
        name="Glucose", value=95.0, value_text="95", unit="mg/dL",
        provenance=Provenance(page=1, line="Glucose 95 mg/dL", start=8, end=10))]),
    review="a value under the OCR confidence threshold",
)  # fmt: skip


async def _at_gate(sm: StateMachine, rid: str, *, flagged: bool) -> Claim:
    """Start ``rid``, commit router and parser (flagging it or not), claim the gate."""
    await ensure_groups(sm.client, sm.keys, STEPS)
    await sm.start(rid, "u1", "router")
    c = await claim_next(sm, "router", "w-a")
    assert (await sm.commit(c, CommitRequest(output=b"{}", next_step="parser"))).code == RC.OK
    c = await claim_next(sm, "parser", "w-a", prev_step="router")
    req = CommitRequest(output=msgspec.json.encode(PARSED), next_step="review",
                        review=PARSED.review if flagged else "")  # fmt: skip
    assert (await sm.commit(c, req)).code == RC.OK
    return await claim_next(sm, "review", "w-a", prev_step="parser")


GATE = WaitPlan(event="", next_step="publish", gate=True)


async def test_an_unflagged_saga_passes_the_gate_with_its_input(
    sm: StateMachine, keys: Keys
) -> None:
    c = await _at_gate(sm, "r1", flagged=False)
    out = await signals.park(sm, c, GATE, worker="w")
    assert (out.code, out.state, out.detail) == (RC.OK, "pending", "publish")
    h = await saga_hash(sm.client, keys, "r1")
    assert (h["state"], h["step"], h["out:review"]) == ("pending", "publish", h["out:parser"])
    assert "wgate" not in h and "wnext" not in h
    assert (await events(sm.client, keys, "r1"))[-1] == "gate_passed"
    p = await claim_next(sm, "publish", "w-a", prev_step="review")
    assert p.input == msgspec.json.encode(PARSED)


async def test_a_flagged_saga_waits_until_its_review_is_accepted(
    sm: StateMachine, keys: Keys
) -> None:
    c = await _at_gate(sm, "r1", flagged=True)
    out = await signals.park(sm, c, GATE, worker="w")
    assert (out.code, out.state) == (RC.OK, "waiting")
    h = await saga_hash(sm.client, keys, "r1")
    assert (h["state"], h["wgate"], h["token"], h["entry"]) == ("waiting", "1", "", "")
    assert await sm.client.zscore(keys.waits(0), "r1") is None  # no timeout: no timer
    assert not await stream_rows(sm.client, keys.ready(0, "publish"))
    again = await signals.park(sm, c, GATE, worker="w")  # a re-sent park
    assert again.code == RC.DUPLICATE
    cleared = await operator.accept_review(sm, "r1", STEPS, actor="ann")
    assert cleared == 1
    h = await saga_hash(sm.client, keys, "r1")
    assert (h["state"], h["step"], h["out:review"]) == ("pending", "publish", h["out:parser"])
    assert "wgate" not in h and await sm.client.zscore(keys.review_index(0), "r1") is None
    assert len(await stream_rows(sm.client, keys.ready(0, "publish"))) == 1
    assert (await events(sm.client, keys, "r1"))[-2:] == ["reviewed", "gate_passed"]
    with pytest.raises(StepConflictError):  # accepted: nothing is flagged any more
        await operator.accept_review(sm, "r1", STEPS, actor="bob")
    assert len(await stream_rows(sm.client, keys.ready(0, "publish"))) == 1


async def test_a_resent_acceptance_moves_the_saga_on_once(sm: StateMachine, keys: Keys) -> None:
    c = await _at_gate(sm, "r1", flagged=True)
    await signals.park(sm, c, GATE, worker="w")
    assert await operator.accept_review(sm, "r1", STEPS, actor="ann", op="op-1") == 1
    assert await operator.accept_review(sm, "r1", STEPS, actor="ann", op="op-1") == 1
    assert len(await stream_rows(sm.client, keys.ready(0, "publish"))) == 1
    assert (await events(sm.client, keys, "r1")).count("gate_passed") == 1


async def test_a_review_accepted_before_the_gate_lets_it_pass(sm: StateMachine, keys: Keys) -> None:
    c = await _at_gate(sm, "r1", flagged=True)
    await operator.accept_review(sm, "r1", STEPS, actor="ann")  # still running at the gate
    out = await signals.park(sm, c, GATE, worker="w")
    assert (out.code, out.state) == (RC.OK, "pending")


async def test_a_gate_timer_takes_its_path(sm: StateMachine, keys: Keys) -> None:
    """fail dead-letters the saga at the gate saying no review came; continue lets it on
    unreviewed, its flag kept."""
    c = await _at_gate(sm, "r1", flagged=True)
    plan = WaitPlan(event="", next_step="publish", gate=True, due_ms=1, on_timeout="fail")
    await signals.park(sm, c, plan, worker="w")
    assert await signals.time_out_due(sm, 0, 10**15) == {"fail": 1}
    h = await saga_hash(sm.client, keys, "r1")
    assert (h["state"], h["step"]) == ("failed", "review")
    assert h["em"] == "no review accepted before the gate timed out"
    c = await _at_gate(sm, "r2", flagged=True)
    plan = WaitPlan(event="", next_step="publish", gate=True, due_ms=1, on_timeout="continue")
    await signals.park(sm, c, plan, worker="w")
    assert await signals.time_out_due(sm, 0, 10**15) == {"continue": 1}
    h = await saga_hash(sm.client, keys, "r2")
    assert (h["state"], h["step"], h["out:review"]) == ("pending", "publish", h["out:parser"])
    assert await sm.client.zscore(keys.review_index(0), "r2") is not None


async def test_a_signal_does_not_open_the_gate(sm: StateMachine, keys: Keys) -> None:
    c = await _at_gate(sm, "r1", flagged=True)
    await signals.park(sm, c, GATE, worker="w")
    res = await signals.signal(sm, "r1", "review", signal_id="s1")
    assert res.outcome == "kept"
    assert (await saga_hash(sm.client, keys, "r1"))["state"] == "waiting"


async def test_the_completing_decision_reruns_through_the_gate(
    sm: StateMachine, keys: Keys
) -> None:
    """A value-level review of a saga at the gate: the last decision re-runs the steps
    after the parser (the gate first) in a new epoch; unflagged now, it passes."""
    c = await _at_gate(sm, "r1", flagged=True)
    timed = WaitPlan(event="", next_step="publish", gate=True, after_ms=600_000)
    await signals.park(sm, c, timed, worker="w")
    assert await sm.client.zscore(keys.waits(0), "r1") is not None
    got = await review.decide(sm, "r1", STEPS, "b0", Kind.ACCEPT, actor="console ann")
    assert got.completed and got.rerun == "review"
    h = await saga_hash(sm.client, keys, "r1")
    assert (h["state"], h["step"], h["epoch"]) == ("pending", "review", "2")
    assert "wgate" not in h and await sm.client.zscore(keys.waits(0), "r1") is None
    c = await claim_next(sm, "review", "w-a", prev_step="parser")
    out = await signals.park(sm, c, GATE, worker="w")
    assert (out.code, out.state, out.detail) == (RC.OK, "pending", "publish")
