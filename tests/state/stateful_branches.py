"""The state machine of the branches model test (tests/state/test_stateful_branches.py).

A hypothesis state machine holds branches and their join (lanes: claim_steps,
commit_steps, fail_step, extend_lease, promote_retries, requeue_idle with
``includes/lanes.lua``) against a small Python model, and each mutant script is caught.

Two records, x -> {a, b} -> j: x forks into the lanes a and b, j joins them. Rules:
start; x claimed and committed (the fork); a lane claimed (claims are kept, so zombies
and re-sent commits are drawn too); a commit or a failure (retry now, or dead) of any
claim ever issued, in any order; the lane retries promoted; a heartbeat of any claim; the
controller's requeue of idle lane entries; j claimed (its input: both lanes' outputs)
and committed; cancel; an operator's retry from x (a new epoch). Every rule predicts the
script's reply from the model; after every rule the invariants below hold in Redis:

- the saga's state is the model's, and its step outside the lanes; inside them the saga
  holds no token or entry of its own, its 'lanes' are the model's lanes in flight and
  each lane's state is the model's;
- j's ready stream has at most one entry per record and epoch: the join fires once;
- no step commits twice in one epoch ('committed' events).
"""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import TypeVar

import msgspec
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
)

from saga.state import operator
from saga.state.codes import RC
from saga.state.connection import connect
from saga.state.errors import LeaseLostError
from saga.state.keys import Keys
from saga.state.machine import StateMachine
from saga.state.model import Claim, FailAction
from saga.state.replies import text
from saga.state.requests import CommitRequest, FailRequest
from saga.state.requeue import idle_pending, requeue_idle
from saga.state.streams import ensure_groups
from tests.state.helpers import history, keys_under, read_ready, stream_rows

T = TypeVar("T")
RECORDS = ("r0", "r1")
LANES = ("a", "b")
STEPS = ("x", *LANES, "j")
FAR_MS = 600_000
ROUTE = {"x": "&+a +b", "a": "|=j=b", "b": "|=j=a"}


@dataclass
class Rec:
    state: str = ""
    """'' (not started), pending, running, completed, failed, cancelled."""
    step: str = ""
    epoch: int = 0
    lanes: dict[str, str] = field(default_factory=dict)
    """Lanes of the current epoch's fork: pending, running, waiting_retry or done."""
    tokens: dict[str, str] = field(default_factory=dict)
    """A running lane's token."""
    done: dict[str, str] = field(default_factory=dict)
    """step -> the token its last commit had (a re-sent commit is a duplicate)."""
    lane_failed: dict[str, str] = field(default_factory=dict)
    """A live lane's last recorded failure's token."""
    failtok: str = ""
    outs: dict[str, bytes] = field(default_factory=dict)

    def live(self) -> bool:
        return self.state == "running" and bool(self.lanes)

    def in_flight(self) -> set[str]:
        return {s for s, st_ in self.lanes.items() if st_ != "done"} if self.live() else set()


class BranchMachine(RuleBasedStateMachine):
    claims = Bundle("claims")

    def __init__(self, url: str) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.client = connect(url)
        self.keys = Keys(prefix=f"b{uuid.uuid4().hex[:10]}")
        self.sm = StateMachine(self.client, self.keys)
        self.model = {rid: Rec() for rid in RECORDS}
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

    def _claim(self, step: str) -> list[Claim]:
        entries = self.run(read_ready(self.client, self.keys, step, "w-a", count=100))
        prev = {"x": "_input", "a": "|x", "b": "|x", "j": "a"}[step]
        extra = ("out:a", "out:b") if step == "j" else ()
        outs = self.run(
            self.sm.claim(step, 0, entries, worker="w-a", lease_ms=FAR_MS,
                          max_lease_expiries=3, prev_step=prev, extra_fields=extra)
        )  # fmt: skip
        got = []
        for o in outs:
            m = self.model[o.record_id]
            if o.claim is None:  # refused: an entry of an earlier epoch, or a cancelled saga's
                assert o.code == RC.STALE_ENTRY, (o, m)
                continue
            c = o.claim
            if step in LANES:
                assert m.live() and m.lanes[step] == "pending", (c.record_id, m)
                assert c.input == m.outs["x"]
                m.lanes[step], m.tokens[step] = "running", c.token
            else:
                assert (m.state, m.step) == ("pending", step), (c.record_id, m)
                m.state, m.tokens[step] = "running", c.token
                if step == "j":
                    assert c.extra == {"out:a": m.outs["a"], "out:b": m.outs["b"]}
            got.append(c)
        if step in LANES:  # every lane waiting for a claim had its entry in the read
            for rid in {r for _, r in entries}:
                m = self.model[rid]
                assert not (m.live() and m.lanes.get(step) == "pending"), (rid, m)
        return got

    # -- rules ------------------------------------------------------------------
    @rule(rid=st.sampled_from(RECORDS))
    def start(self, rid: str) -> None:
        m = self.model[rid]
        if m.state:
            return
        self.run(self.sm.start(rid, "u1", "x"))
        m.state, m.step, m.epoch = "pending", "x", 0

    def _at(self, step: str) -> bool:
        return any(m.state == "pending" and m.step == step for m in self.model.values())

    @precondition(lambda self: self._at("x"))
    @rule()
    def fork(self) -> None:
        for c in self._claim("x"):
            req = CommitRequest(output=b'{"x":1}', next_step=ROUTE["x"])
            out = self.run(self.sm.commit(c, req))
            assert (out.code, out.state, out.detail) == (RC.OK, "running", "a,b"), out
            m = self.model[c.record_id]
            m.state, m.step, m.outs["x"], m.done["x"] = "running", "a", b'{"x":1}', c.token
            m.lanes, m.lane_failed = {"a": "pending", "b": "pending"}, {}

    @precondition(lambda self: any(m.live() for m in self.model.values()))
    @rule(target=claims, step=st.sampled_from(LANES))
    def claim_lane(self, step: str) -> Claim | None:
        got = self._claim(step)
        return got[0] if got else None

    @rule(c=claims)
    def commit(self, c: Claim | None) -> None:
        if c is None:
            return
        m = self.model[c.record_id]
        output = f'{{"by":"{c.token}"}}'.encode()
        out = self.run(self.sm.commit(c, CommitRequest(output=output, next_step=ROUTE[c.step])))
        if m.done.get(c.step) == c.token:
            assert out.code == RC.DUPLICATE, (out, m)
            return
        if not self._running(m, c):
            assert out.code == RC.LEASE_LOST, (out, m)
            return
        m.lanes[c.step], m.done[c.step], m.outs[c.step] = "done", c.token, output
        other = "b" if c.step == "a" else "a"
        if m.lanes[other] == "done":  # the last parent: the join fires here
            assert (out.code, out.state, out.detail) == (RC.OK, "pending", "j"), (out, m)
            m.state, m.step, m.lanes = "pending", "j", {}
        else:
            assert (out.code, out.state, out.detail) == (RC.OK, "running", ""), (out, m)
            m.step = next(s for s in LANES if s in m.in_flight())  # the first lane left

    @rule(c=claims, dead=st.booleans())
    def fail(self, c: Claim | None, dead: bool) -> None:
        if c is None:
            return
        m = self.model[c.record_id]
        req = FailRequest(action=FailAction.DEAD if dead else FailAction.RETRY,
                          error_class="Boom", error_message="boom", delay_ms=0)  # fmt: skip
        out = self.run(self.sm.fail(c, req))
        # fail_step reads a live lane's recorded failure when the token is the lane's
        # (running, or its failure recorded); else the saga's (a dead lane's, kept).
        own = m.live() and (self._running(m, c) or m.lane_failed.get(c.step) == c.token)
        dup = m.lane_failed.get(c.step) == c.token if own else m.failtok == c.token
        if dup:
            assert out.code == RC.DUPLICATE, (out, m)
            return
        if not self._running(m, c):
            assert out.code == RC.LEASE_LOST, (out, m)
            return
        if dead:
            assert (out.code, out.state) == (RC.OK, "failed"), out
            m.state, m.step, m.failtok, m.lanes = "failed", c.step, c.token, {}
        else:
            assert (out.code, out.state) == (RC.OK, "waiting_retry"), out
            m.lanes[c.step], m.lane_failed[c.step] = "waiting_retry", c.token

    @precondition(lambda self: any(m.state for m in self.model.values()))
    @rule(step=st.sampled_from(LANES))
    def promote(self, step: str) -> None:
        rids = [r for r, _ in self.run(self.sm.due_candidates(step, 0, 10))]
        want = [r for r in rids if self.model[r].in_flight() and
                self.model[r].lanes[step] == "waiting_retry"]  # fmt: skip
        promoted, waiting = self.run(self.sm.promote(step, 0, rids))
        assert (promoted, waiting) == (len(want), 0), (rids, want)
        for r in want:
            self.model[r].lanes[step] = "pending"

    @rule(c=claims)
    def heartbeat(self, c: Claim | None) -> None:
        if c is None:
            return
        m = self.model[c.record_id]
        try:
            extended = self.run(self.sm.heartbeat(c, worker="w-a", lease_ms=FAR_MS)) > 0
        except LeaseLostError:
            extended = False
        assert extended == self._running(m, c), (c, m)

    @precondition(lambda self: any(m.state for m in self.model.values()))
    @rule(step=st.sampled_from(LANES))
    def requeue(self, step: str) -> None:
        """The controller's requeue of idle entries: a live lane's running attempt keeps
        its lease; anything else is dropped."""
        ready = self.keys.ready(0, step)
        idle = self.run(idle_pending(self.client, ready, min_idle_ms=0))
        pairs = [(e.entry_id, text(e.fields[b"rid"])) for e in idle if e.fields]
        epochs = [int(e.fields[b"ep"]) for e in idle if e.fields]
        got = self.run(requeue_idle(self.sm, step, 0, pairs, min_idle_ms=0))
        for (_, rid), ep, o in zip(pairs, epochs, got, strict=True):
            m = self.model[rid]
            # an entry of an earlier epoch (claimed, then the saga cancelled and retried)
            # is stale even while the lane runs again under the new epoch
            lane_ep = m.tokens.get(step, "0:").split(":")[0]  # a token is "<epoch>:<n>"
            live = m.live() and m.lanes.get(step) == "running" and str(ep) == lane_ep
            assert o.code == (RC.LEASE_HELD if live else RC.STALE_ENTRY), (o, m)

    @precondition(lambda self: self._at("j"))
    @rule()
    def join(self) -> None:
        for c in self._claim("j"):
            out = self.run(self.sm.commit(c, CommitRequest(output=b"{}", next_step="")))
            assert out.code == RC.OK
            m = self.model[c.record_id]
            m.state, m.done["j"] = "completed", c.token

    @rule(rid=st.sampled_from(RECORDS))
    def cancel(self, rid: str) -> None:
        m = self.model[rid]
        if m.state in ("", "completed", "cancelled"):
            return
        self.run(operator.cancel(self.sm, rid))
        m.state, m.lanes = "cancelled", {}

    @rule(rid=st.sampled_from(RECORDS))
    def retry(self, rid: str) -> None:
        """An operator re-runs the saga from x, the step its branches fork from."""
        m = self.model[rid]
        if m.state not in ("failed", "cancelled"):
            return
        res = self.run(operator.retry(self.sm, rid, "x", "_input", steps=STEPS))
        m.state, m.step, m.epoch, m.lanes = "pending", "x", res.epoch, {}

    def _running(self, m: Rec, c: Claim) -> bool:
        return m.live() and m.lanes.get(c.step) == "running" and m.tokens.get(c.step) == c.token

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
            assert h["state"] == m.state, (rid, h, m)
            if m.live():
                assert h["token"] == "" and h["entry"] == "", h
                assert set(h["lanes"].split()) == m.in_flight(), (h, m)
                assert h["step"] in m.in_flight()
                for lane in m.in_flight():
                    assert h[f"ls@{lane}"] == m.lanes[lane], (lane, h, m)
            else:
                assert h["step"] == m.step, (rid, h, m)
            hist = await history(self.client, self.keys, rid)
            commits = Counter((f["s"], f["ep"]) for f in hist if f.get("e") == "committed")
            assert max(commits.values(), default=0) <= 1, commits  # exactly-once commits
        rows = await stream_rows(self.client, self.keys.ready(0, "j"))
        joins = [(f["rid"], f["ep"]) for _, f in rows]
        assert len(joins) == len(set(joins)), joins  # the join fires once per epoch
        for (rid, ep), _ in Counter(joins).items():
            m = self.model[rid]
            assert m.done.get("a", "").startswith(f"{ep}:") or int(ep) < m.epoch
            assert msgspec.json.decode(m.outs.get("a", b"{}")) is not None
