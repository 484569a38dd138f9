"""A hypothesis state machine holds the review gate (park_wait with the gate flag,
accept_review at the gate) against a small Python model, and each mutant is caught.

Two records, router -> parser -> review (the gate) -> publish. Rules: start; the router
claimed and committed; the parser claimed and committed, flagging the saga for review
or not; the gate claimed (claims are kept, so zombies and re-sent parks are drawn too);
a park with any claim ever issued; a person's acceptance (sometimes re-sent under the
same op id); cancel; publish claimed and committed. Every rule predicts the script's
reply from the model; after every rule the invariants are checked against Redis:

- the saga's state and step are the model's; a saga waiting at the gate holds no token
  and no entry and is marked 'wgate'; no other saga is;
- a saga is in the review index exactly while the model has it flagged;
- publish's ready stream has at most one entry per record and epoch, and none for a
  record that was flagged when it got past the gate (nothing flagged is published
  unreviewed);
- the gate is passed ('gate_passed') at most once per record and epoch.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import uuid
from collections.abc import Awaitable, Iterator
from dataclasses import dataclass
from typing import TypeVar

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from saga.state import operator, signals
from saga.state.codes import RC
from saga.state.connection import connect
from saga.state.errors import StepConflictError
from saga.state.keys import Keys
from saga.state.machine import StateMachine
from saga.state.model import Claim
from saga.state.replies import text
from saga.state.requests import CommitRequest
from saga.state.signals import WaitPlan
from saga.state.streams import ensure_groups
from tests.state.helpers import history, keys_under, read_ready, stream_rows
from tests.state.mutants import mutated

T = TypeVar("T")
RECORDS = ("r0", "r1")
STEPS = ("router", "parser", "review", "publish")
PREV = {"router": "_input", "parser": "router", "review": "parser", "publish": "review"}
GATE = WaitPlan(event="", next_step="publish", gate=True)
FAR_MS = 600_000


@dataclass
class Rec:
    state: str = ""
    step: str = ""
    token: str = ""
    flagged: bool = False
    wtok: str = ""
    """The token the gate parked with: a park re-sent with it while waiting is a duplicate."""
    done_tok: str = ""
    """The token of the gate attempt that let the saga on: a duplicate too."""
    accepted_op: str = ""
    accepted: int = 0
    """The last acceptance's op id and how many flags it cleared (a re-send's reply)."""
    passed_flagged: bool = False


class GateMachine(RuleBasedStateMachine):
    claims = Bundle("claims")

    def __init__(self, url: str) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.client = connect(url)
        self.keys = Keys(prefix=f"g{uuid.uuid4().hex[:10]}")
        self.sm = StateMachine(self.client, self.keys)
        self.model = {rid: Rec() for rid in RECORDS}
        self.ops = 0
        self.run(ensure_groups(self.client, self.keys, STEPS))

    def run(self, aw: Awaitable[T]) -> T:
        return self.loop.run_until_complete(aw)

    def teardown(self) -> None:
        try:
            stale = self.run(keys_under(self.client, self.keys.prefix))
            if stale:
                self.run(self.client.delete(*stale))
            self.run(self.client.aclose())
        finally:
            self.loop.close()

    def _at(self, state: str, step: str = "") -> list[str]:
        return [r for r, m in self.model.items() if m.state == state and step in ("", m.step)]

    def _claim(self, step: str) -> list[Claim]:
        entries = self.run(read_ready(self.client, self.keys, step, "w-a"))
        outs = self.run(
            self.sm.claim(step, 0, entries, worker="w-a", lease_ms=FAR_MS,
                          max_lease_expiries=3, prev_step=PREV[step])
        )  # fmt: skip
        got = [o.claim for o in outs if o.claim is not None]
        for c in got:
            m = self.model[c.record_id]
            assert (m.state, m.step) == ("pending", step), (c.record_id, m)
            m.state, m.token = "running", c.token
        return got

    def _commit(self, step: str, nxt: str, review: str = "") -> None:
        for c in self._claim(step):
            req = CommitRequest(output=f'{{"{step}":1}}'.encode(), next_step=nxt, review=review)
            assert self.run(self.sm.commit(c, req)).code == RC.OK
            m = self.model[c.record_id]
            m.state, m.step = ("pending", nxt) if nxt else ("completed", step)
            if review:
                m.flagged = True

    # -- rules ------------------------------------------------------------------
    @precondition(lambda self: bool(self._at("")))
    @rule(rid=st.sampled_from(RECORDS))
    def start(self, rid: str) -> None:
        m = self.model[rid]
        if m.state:
            return
        self.run(self.sm.start(rid, "u1", "router"))
        m.state, m.step = "pending", "router"

    @precondition(lambda self: bool(self._at("pending", "router")))
    @rule()
    def route(self) -> None:
        self._commit("router", "parser")

    @precondition(lambda self: bool(self._at("pending", "parser")))
    @rule(flag=st.booleans())
    def parse(self, flag: bool) -> None:
        self._commit("parser", "review", "a value under the confidence threshold" if flag else "")

    @precondition(lambda self: bool(self._at("pending", "review")))
    @rule(target=claims)
    def claim_gate(self) -> Claim:
        got = self._claim("review")
        assert got
        return got[0]

    @rule(c=claims)
    def park(self, c: Claim) -> None:
        m = self.model[c.record_id]
        out = self.run(signals.park(self.sm, c, GATE, worker="w-a"))
        if m.done_tok == c.token or (m.state == "waiting" and m.wtok == c.token):
            assert out.code == RC.DUPLICATE, out
            return
        if not (m.state == "running" and m.step == "review" and m.token == c.token):
            assert out.code == RC.LEASE_LOST, (out, m)
            return
        m.wtok = c.token
        if m.flagged:
            assert (out.code, out.state) == (RC.OK, "waiting"), out
            m.state = "waiting"
            return
        assert (out.code, out.state, out.detail) == (RC.OK, "pending", "publish"), out
        self._passed(c.record_id)

    @precondition(lambda self: any(m.state for m in self.model.values()))
    @rule(rid=st.sampled_from(RECORDS), resend=st.booleans())
    def accept(self, rid: str, resend: bool) -> None:
        m = self.model[rid]
        if not m.state:
            return
        if resend and m.accepted_op:
            try:
                got = self.run(operator.accept_review(self.sm, rid, STEPS, actor="ann",
                                                      op=m.accepted_op))  # fmt: skip
            except StepConflictError as exc:
                raise AssertionError(f"a re-sent acceptance was refused: {exc}") from None
            assert got == m.accepted, (got, m)
            return
        self.ops += 1
        op = f"op-{self.ops}"
        if not m.flagged:
            with pytest.raises(StepConflictError):
                self.run(operator.accept_review(self.sm, rid, STEPS, actor="ann", op=op))
            return
        got = self.run(operator.accept_review(self.sm, rid, STEPS, actor="ann", op=op))
        assert got == 1, got
        m.flagged, m.accepted_op, m.accepted = False, op, got
        if m.state == "waiting":
            self._passed(rid)

    @precondition(lambda self: any(m.state for m in self.model.values()))
    @rule(rid=st.sampled_from(RECORDS))
    def cancel(self, rid: str) -> None:
        m = self.model[rid]
        if m.state in ("", "completed", "cancelled"):
            return
        self.run(operator.cancel(self.sm, rid))
        m.state = "cancelled"

    @precondition(lambda self: bool(self._at("pending", "publish")))
    @rule()
    def publish(self) -> None:
        self._commit("publish", "")

    def _passed(self, rid: str) -> None:
        m = self.model[rid]
        m.passed_flagged = m.passed_flagged or m.flagged
        m.state, m.step, m.done_tok = "pending", "publish", m.wtok

    # -- invariants ---------------------------------------------------------------
    @invariant()
    def redis_agrees_with_the_model(self) -> None:
        self.run(self._check())

    async def _check(self) -> None:
        for rid, m in self.model.items():
            raw = await self.client.hgetall(self.keys.saga(rid))
            h = {text(k): text(v) for k, v in raw.items()}
            if not m.state:
                assert not h
                continue
            assert (h["state"], h["step"]) == (m.state, m.step), (rid, h, m)
            if m.state == "waiting":
                assert (h["token"], h["entry"], h.get("wgate")) == ("", "", "1"), h
            else:
                assert not h.get("wgate"), (rid, h)
            flagged = await self.client.zscore(self.keys.review_index(0), rid) is not None
            assert flagged == m.flagged, (rid, flagged, m)
            assert not m.passed_flagged, (rid, "a flagged saga got past the gate unreviewed")
            hist = await history(self.client, self.keys, rid)
            passes = [f["ep"] for f in hist if f.get("e") == "gate_passed"]
            assert len(passes) == len(set(passes)), passes
        rows = await stream_rows(self.client, self.keys.ready(0, "publish"))
        ends = [(f["rid"], f["ep"]) for _, f in rows]
        assert len(ends) == len(set(ends)), ends  # the gate lets a saga on once per epoch


SOAK = os.environ.get("SAGA_SOAK", "").lower() in ("1", "true", "yes")
SETTINGS = settings(
    max_examples=300 if SOAK else 30, stateful_step_count=60 if SOAK else 30, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)  # fmt: skip
"""``SAGA_SOAK=1`` runs ten times more examples, each twice as long."""


def test_the_review_gate_holds_against_the_model(redis_url: str) -> None:
    """Random interleavings of parses, parks, acceptances and cancels keep the model's word."""
    run_state_machine_as_test(lambda: GateMachine(redis_url), settings=SETTINGS)  # type: ignore[arg-type]


MUTANTS = {
    "a flagged saga passes the gate": (
        "park_wait.lua",
        "if gate and not redis.call('ZSCORE', KEYS[12], record) then",
        "if gate then",
    ),
    "an acceptance leaves the gated saga waiting": (
        "accept_review.lua",
        "local gated = s[1] == STATE.WAITING and s[6] == '1'",
        "local gated = false",
    ),
    "a re-sent acceptance is not recognised": (
        "accept_review.lua",
        "if replay then return replay end",
        "",
    ),
    "the gate mark outlives the wait": (
        "includes/wait.lua",
        ",\n             'wgate')",
        ")",
    ),
    "a re-sent park parks again": (
        "park_wait.lua",
        "(s[1] == STATE.WAITING and s[2] == step and s[8] == token)",
        "false",
    ),
}


@pytest.fixture
def mutant(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    yield from mutated(monkeypatch, MUTANTS, request.param)


def _scenario(m: GateMachine) -> None:
    """r0 flagged: it waits at the gate (a re-sent park a duplicate), is accepted (the
    acceptance re-sent) and goes on; r1 clean: it passes at once; both are published."""
    m.start("r0")
    m.route()
    m.parse(True)
    c0 = m.claim_gate()
    m.park(c0)
    m.redis_agrees_with_the_model()
    m.park(c0)  # re-sent
    m.redis_agrees_with_the_model()
    m.start("r1")
    m.route()
    m.parse(False)
    m.park(m.claim_gate())
    m.redis_agrees_with_the_model()
    m.accept("r1", False)  # nothing flagged: refused
    m.accept("r0", False)
    m.redis_agrees_with_the_model()
    m.accept("r0", True)  # re-sent
    m.redis_agrees_with_the_model()
    m.publish()
    m.redis_agrees_with_the_model()


@pytest.mark.parametrize("mutant", list(MUTANTS), indirect=True)
def test_each_mutant_is_caught(redis_url: str, mutant: str) -> None:
    """The real scripts pass the scenario; on each mutant, a rule's or the invariant's
    check fails."""
    with _machine(redis_url) as m, pytest.raises(AssertionError):
        _scenario(m)


def test_the_scenario_passes_with_the_real_scripts(redis_url: str) -> None:
    with _machine(redis_url) as m:
        _scenario(m)


@contextlib.contextmanager
def _machine(url: str) -> Iterator[GateMachine]:
    m = GateMachine(url)
    try:
        yield m
    finally:
        m.teardown()
