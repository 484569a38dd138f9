"""A hypothesis state machine holds the wait transitions (park_wait, signal_saga,
time_out_wait) against a small Python model, and each mutant script is caught.

Two records, router -> parser -> grouper, where the parser is a wait step for the event
``approved``. Rules: start; the router claimed and committed; the wait claimed (claims
are kept, so zombies and re-sent parks are drawn too); a park with any claim ever issued
(no timer, a timer due at once, or one due in ten minutes; on timeout: default, continue,
fail or compensate); a signal with one of three ids and one of two events; the timer
sweep (with a clock far ahead of the server's: the script re-checks by its own); cancel;
an operator's retry from the wait; the grouper claimed and committed. Every rule
predicts the script's reply from the model; after every rule the invariants below are
checked against Redis:

- the saga's state and step are the model's; a waiting saga holds no token and no entry;
- a waiting saga with a timer has its member in the partition's waits, due then;
- each signal id ends at most one wait ('signalled' events), a kept signal is the one
  the model kept, and the wait's output is the data that ended it (or the default, or the
  router's output passed through);
- the grouper's ready stream has at most one entry per record and epoch (a wait ends
  once; an operator's retry re-parks it in a new epoch).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import uuid
from collections.abc import Awaitable, Iterator
from dataclasses import dataclass, field
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
from saga.state.streams import ensure_groups
from tests.state.helpers import history, keys_under, read_ready, stream_rows
from tests.state.mutants import mutated

T = TypeVar("T")
RECORDS = ("r0", "r1")
STEPS = ("router", "parser", "grouper", "undo:router")
SIGNAL_IDS = ("s0", "s1", "s2")
EVENTS = ("approved", "other")
FAR_MS = 600_000
DEFAULT = b'{"by":"nobody"}'
ROUTED = b'{"routed":true}'


@dataclass
class Rec:
    state: str = ""
    """'' (not started), pending, running, waiting, completed, failed, cancelled,
    compensating."""
    step: str = ""
    token: str = ""
    wtok: str = ""
    """The token the wait was parked with: a park re-sent with it, while the saga waits,
    is a duplicate."""
    done_tok: str = ""
    """The token of the wait that went on (signal, default, continue): a duplicate too."""
    timer: str = ""
    """'' none, 'now' (due at once) or 'far'."""
    on_timeout: str = ""
    kept: dict[str, tuple[str, bytes]] = field(default_factory=dict)
    """event -> (signal id, data) kept for a wait to come."""
    seen: set[str] = field(default_factory=set)
    out: bytes | None = None
    """What ended the wait: the parser's output."""


class WaitMachine(RuleBasedStateMachine):
    claims = Bundle("claims")

    def __init__(self, url: str) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.client = connect(url)
        self.keys = Keys(prefix=f"w{uuid.uuid4().hex[:10]}")
        self.sm = StateMachine(self.client, self.keys)
        self.model = {rid: Rec() for rid in RECORDS}
        self.consumed: dict[str, int] = {}
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
        prev = {"router": "_input", "parser": "router", "grouper": "parser"}[step]
        outs = self.run(
            self.sm.claim(step, 0, entries, worker="w-a", lease_ms=FAR_MS,
                          max_lease_expiries=3, prev_step=prev)
        )  # fmt: skip
        got = [o.claim for o in outs if o.claim is not None]
        for c in got:
            m = self.model[c.record_id]
            assert (m.state, m.step) == ("pending", step), (c.record_id, m)
            m.state, m.token = "running", c.token
        return got

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
        for c in self._claim("router"):
            out = self.run(self.sm.commit(c, CommitRequest(output=ROUTED, next_step="parser")))
            assert out.code == RC.OK
            self.model[c.record_id].state, self.model[c.record_id].step = "pending", "parser"

    @precondition(lambda self: bool(self._at("pending", "parser")))
    @rule(target=claims)
    def claim_wait(self) -> Claim:
        got = self._claim("parser")
        assert got
        return got[0]

    @rule(
        c=claims,
        timer=st.sampled_from(["", "now", "far"]),
        path=st.sampled_from(["default", "continue", "fail", "compensate"]),
    )
    def park(self, c: Claim, timer: str, path: str) -> None:
        m = self.model[c.record_id]
        due = {"": 0, "now": 1}.get(timer, 0)
        plan = signals.WaitPlan(
            event="approved", next_step="grouper", due_ms=due,
            after_ms=FAR_MS if timer == "far" else 0, on_timeout=path, default=DEFAULT,
            undo=("router",),
        )  # fmt: skip
        out = self.run(signals.park(self.sm, c, plan, worker="w-a"))
        if m.done_tok == c.token or (m.state == "waiting" and m.wtok == c.token):
            assert out.code == RC.DUPLICATE, out
            return
        if not (m.state == "running" and m.step == "parser" and m.token == c.token):
            assert out.code == RC.LEASE_LOST, (out, m)
            return
        m.wtok = c.token
        if "approved" in m.kept:
            sid, data = m.kept.pop("approved")
            assert (out.code, out.state, out.detail) == (RC.OK, "pending", "grouper"), out
            self._ended(c.record_id, data)
            self.consumed[f"{c.record_id}:{sid}"] = self.consumed.get(f"{c.record_id}:{sid}", 0) + 1
            return
        assert (out.code, out.state) == (RC.OK, "waiting"), out
        m.state, m.timer, m.on_timeout = "waiting", timer, path

    @precondition(lambda self: any(m.state for m in self.model.values()))
    @rule(rid=st.sampled_from(RECORDS), sid=st.sampled_from(SIGNAL_IDS),
          event=st.sampled_from(EVENTS))  # fmt: skip
    def signal(self, rid: str, sid: str, event: str) -> None:
        m = self.model[rid]
        if not m.state:
            return
        data = f'{{"sid":"{sid}"}}'.encode()
        if sid in m.seen:
            res = self.run(signals.signal(self.sm, rid, event, data=data, signal_id=sid))
            assert res.outcome == "seen", res
            return
        if m.state in ("completed", "failed", "cancelled", "compensating"):
            with pytest.raises(StepConflictError):
                self.run(signals.signal(self.sm, rid, event, data=data, signal_id=sid))
            return
        res = self.run(signals.signal(self.sm, rid, event, data=data, signal_id=sid))
        m.seen.add(sid)
        if m.state == "waiting" and event == "approved":
            assert (res.outcome, res.next_step) == ("consumed", "grouper"), res
            self._ended(rid, data)
            self.consumed[f"{rid}:{sid}"] = self.consumed.get(f"{rid}:{sid}", 0) + 1
        elif event in m.kept:
            assert res.outcome == "dropped", res
        else:
            assert res.outcome == "kept", res
            m.kept[event] = (sid, data)

    @precondition(lambda self: bool(self._at("waiting")) or bool(self._at("cancelled")))
    @rule()
    def sweep(self) -> None:
        """The sweep with a clock far ahead: the script goes by the server's."""
        want: dict[str, int] = {}
        for rid, m in self.model.items():
            if m.state != "waiting" or not m.timer:
                continue
            if m.timer == "far":
                want["not_due"] = want.get("not_due", 0) + 1
                continue
            want[m.on_timeout] = want.get(m.on_timeout, 0) + 1
            if m.on_timeout in ("default", "continue"):
                self._ended(rid, DEFAULT if m.on_timeout == "default" else ROUTED)
            elif m.on_timeout == "fail":
                m.state = "failed"
            else:
                m.state, m.step = "compensating", "undo:router"
            m.timer = ""
        got = self.run(signals.time_out_due(self.sm, 0, 10**15))
        got.pop("gone", None)  # a cancelled saga's timer, removed
        assert got == want

    @precondition(lambda self: any(m.state for m in self.model.values()))
    @rule(rid=st.sampled_from(RECORDS))
    def cancel(self, rid: str) -> None:
        m = self.model[rid]
        if m.state in ("", "completed", "compensating"):
            return
        self.run(operator.cancel(self.sm, rid))
        m.state, m.timer = "cancelled", ""

    @precondition(lambda self: any(m.state for m in self.model.values()))
    @rule(rid=st.sampled_from(RECORDS))
    def retry(self, rid: str) -> None:
        """An operator re-runs the saga from its wait (a new epoch): it parks again; its
        kept signals and the ids it has seen stay."""
        m = self.model[rid]
        if m.state in ("", "running", "compensating") or m.step == "router":
            return
        if m.state == "pending" and m.step == "parser":
            return
        self.run(operator.retry(self.sm, rid, "parser", "router", steps=("router", "parser")))
        m.state, m.step, m.timer = "pending", "parser", ""

    @precondition(lambda self: bool(self._at("pending", "grouper")))
    @rule()
    def finish(self) -> None:
        for c in self._claim("grouper"):
            out = self.run(self.sm.commit(c, CommitRequest(output=b"{}", next_step="")))
            assert out.code == RC.OK
            self.model[c.record_id].state = "completed"

    def _ended(self, rid: str, data: bytes) -> None:
        m = self.model[rid]
        m.state, m.step, m.out, m.timer, m.done_tok = "pending", "grouper", data, "", m.wtok

    # -- invariants ---------------------------------------------------------------
    @invariant()
    def redis_agrees_with_the_model(self) -> None:
        self.run(self._check())

    async def _check(self) -> None:
        for rid, m in self.model.items():
            h = {
                text(k): text(v)
                for k, v in (await self.client.hgetall(self.keys.saga(rid))).items()
            }
            if not m.state:
                assert not h
                continue
            assert (h["state"], h["step"]) == (m.state, m.step), (rid, h, m)
            if m.state == "waiting":
                assert h["token"] == "" and h["entry"] == ""
                score = await self.client.zscore(self.keys.waits(0), rid)
                if m.timer:
                    assert score is not None and int(score) == int(h["wdue"]) > 0
                else:
                    assert score is None
            for event, (sid, data) in m.kept.items():
                assert (h.get(f"sgi:{event}"), h.get(f"sig:{event}")) == (sid, data.decode())
            if m.out is not None:
                assert h["out:parser"] == m.out.decode()
            hist = await history(self.client, self.keys, rid)
            ids = [f["x"].split(" ")[-1] for f in hist if f.get("e") == "signalled"]
            assert len(ids) == len(set(ids)), ids  # each signal id ends one wait at most
        rows = await stream_rows(self.client, self.keys.ready(0, "grouper"))
        ends = [(f["rid"], f["ep"]) for _, f in rows]
        assert len(ends) == len(set(ends)), ends  # a wait ends once per epoch


SOAK = os.environ.get("SAGA_SOAK", "").lower() in ("1", "true", "yes")
SETTINGS = settings(
    max_examples=300 if SOAK else 30, stateful_step_count=60 if SOAK else 30, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)  # fmt: skip
"""``SAGA_SOAK=1`` runs ten times more examples, each twice as long."""


def test_waits_hold_against_the_model(redis_url: str) -> None:
    """Random interleavings of parks, signals, sweeps and cancels keep the model's word."""
    run_state_machine_as_test(lambda: WaitMachine(redis_url), settings=SETTINGS)  # type: ignore[arg-type]


MUTANTS = {
    "duplicate signal delivered again": (
        "signal_saga.lua",
        "if s[8] then return {RC.DUPLICATE, s[1], 'seen'} end",
        "",
    ),
    "kept signal ignored at the wait": (
        "park_wait.lua",
        "  if kept[1] then",
        "  if false then",
    ),
    "timer fired before it is due": (
        "time_out_wait.lua",
        "if tonumber(s[5]) > now or due > now then return {RC.OK, s[1], 'not_due'} end",
        "",
    ),
    "a re-run wait keeps an earlier timer": (
        "park_wait.lua",
        "  redis.call('ZREM', waits, record)\n",
        "",
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


def _scenario(m: WaitMachine, name: str) -> None:
    """The short run that shows the mutant ``name`` (or passes with the real scripts)."""
    m.start("r0")
    if name in ("duplicate signal delivered again", "kept signal ignored at the wait"):
        m.signal("r0", "s0", "approved")  # kept: r0 is at the router
        m.redis_agrees_with_the_model()
        m.signal("r0", "s0", "approved")  # the same id: seen
    m.route()
    claim = m.claim_wait()
    timer = "far" if name in ("timer fired before it is due",
                              "a re-run wait keeps an earlier timer") else ""  # fmt: skip
    m.park(claim, timer, "fail")
    m.redis_agrees_with_the_model()
    m.park(claim, timer, "fail")  # re-sent
    if timer:
        m.sweep()
    m.redis_agrees_with_the_model()
    if name == "a re-run wait keeps an earlier timer":
        m.retry("r0")
        m.park(m.claim_wait(), "", "fail")  # no timer this time
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
def _machine(url: str) -> Iterator[WaitMachine]:
    m = WaitMachine(url)
    try:
        yield m
    finally:
        m.teardown()
