"""A hypothesis state machine drives the Lua transitions against a small Python model.

Three records, two steps (router -> parser), two workers. Rules: start, read+claim
(XREADGROUP, or XAUTOCLAIM with min_idle 0 after a lease expired), heartbeat, commit
and fail with any claim ever issued (zombies included), promote, manual retry, cancel.

Time: leases are issued for ten minutes, so they never lapse on their own during a
run. The ``expire_lease`` rule stands in for time passing: it sets the saga's lease
deadline to 0 (HSET lease 0), after which another worker may take the entry over.
Delayed retries are due at once (delay 0) or in ten minutes; ``promote`` may force
them due with ZADD score 0, the same stand-in.

Every rule predicts the script's outcome from the model and checks it; after every
rule the invariants are checked against Redis:
- at most one 'committed' event per (record, step, epoch);
- the history is a valid path through the transition table below, ending where the
  saga hash is;
- no entry is lost: a pending saga's entry is in its ready stream and not yet
  delivered, a running saga's entry is pending in the group, nothing else is pending;
  a waiting saga has its delayed-set member; a failed saga has its dead letter;
- a stale token never writes (checked in the commit/fail/heartbeat rules: only a
  'fenced' history event may appear);
- the state index sets agree with the hashes.

``SAGA_SOAK=1`` runs ten times more examples, each ten times longer.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections import Counter
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import msgspec
import pytest
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    initialize,
    invariant,
    multiple,
    precondition,
    rule,
    run_state_machine_as_test,
)

from saga.state import operator
from saga.state.codes import RC
from saga.state.connection import connect
from saga.state.errors import SagaNotFoundError, StateError, StepConflictError
from saga.state.keys import GROUP, Keys
from saga.state.machine import CommitRequest, FailRequest, StateMachine
from saga.state.model import Claim, FailAction, SagaState
from saga.state.recovery import recover_idle
from saga.state.replies import text
from saga.state.streams import ensure_groups
from tests.state.helpers import keys_under, read_ready, snapshot

T = TypeVar("T")
RECORDS = ("r0", "r1", "r2")
STEPS = ("router", "parser")
NEXT = {"router": "parser", "parser": ""}
PREV = {"router": "_input", "parser": "router"}
WORKERS = ("w-a", "w-b")
MAX_ATTEMPTS = 2
LEASE_MS = 600_000
LATER_MS = 600_000

P, R, W = SagaState.PENDING, SagaState.RUNNING, SagaState.WAITING_RETRY
C, F, X = SagaState.COMPLETED, SagaState.FAILED, SagaState.CANCELLED
ANY = frozenset(SagaState)
SAME = None
TRANSITIONS: dict[str, tuple[frozenset[SagaState | None], SagaState | None]] = {
    # event:          (states it may follow,        state it leads to)
    "started": (frozenset({None}), P),
    "claimed": (frozenset({P}), R),
    "reclaimed": (frozenset({R}), R),
    "committed": (frozenset({R}), P),  # or completed when it names no next step
    "retry_scheduled": (frozenset({R}), W),
    "parked": (frozenset({R}), W),
    "dead_lettered": (frozenset({R}), F),
    "promoted": (frozenset({W}), P),
    "retried": (ANY, P),
    "cancelled": (frozenset({P, R, W, F}), X),
    "fenced": (ANY, SAME),
}
"""The allowed history paths, as data: every event, where it may come from, where it goes."""

SOAK = os.environ.get("SAGA_SOAK") == "1"
SETTINGS = settings(
    max_examples=1000 if SOAK else 100,
    stateful_step_count=500 if SOAK else 50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


@dataclass
class Rec:
    """What the model knows of one record's saga."""

    state: SagaState | None = None
    step: str = ""
    epoch: int = 0
    seq: int = 0
    entry: str = ""
    token: str = ""
    lease_live: bool = False
    due_past: bool = False
    failtok: str = ""
    attempts: dict[str, tuple[int, int]] = field(default_factory=dict)
    done: dict[str, str] = field(default_factory=dict)
    outputs: set[str] = field(default_factory=lambda: {"_input"})

    def attempts_at(self, step: str) -> int:
        epoch, n = self.attempts.get(step, (0, 0))
        return n if epoch == self.epoch else 0


class SagaMachine(RuleBasedStateMachine):
    claims = Bundle("claims")

    def __init__(self, url: str) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.client = connect(url)
        self.keys = Keys(prefix=f"h{uuid.uuid4().hex[:10]}")
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

    def _entry_of(self, rid: str) -> str:
        return text(self.run(self.client.hget(self.keys.saga(rid), "entry")))

    # -- rules ----------------------------------------------------------------
    @rule(rid=st.sampled_from(RECORDS))
    def start(self, rid: str) -> None:
        m = self.model[rid]
        res = self.run(self.sm.start(rid, "u-" + rid, "router", input_json=b'{"n":1}'))
        assert res.created == (m.state is None)
        if m.state is None:
            m.state, m.step, m.epoch = P, "router", 1
            m.entry = self._entry_of(rid)
        assert (res.state, res.step, res.epoch) == (m.state, m.step, m.epoch)

    def _in(self, *states: SagaState) -> bool:
        return any(m.state in states for m in self.model.values())

    @initialize(rids=st.sets(st.sampled_from(RECORDS), min_size=1))
    def start_some(self, rids: set[str]) -> None:
        for rid in sorted(rids):
            self.start(rid)

    @precondition(lambda self: self._in(P))
    @rule(target=claims, worker=st.sampled_from(WORKERS))
    def claim_ready(self, worker: str) -> Any:
        """XREADGROUP new entries of both steps and claim them as one batch per step."""
        issued = []
        for step in STEPS:
            entries = self.run(read_ready(self.client, self.keys, step, worker, count=10))
            issued += self._claim(step, entries, worker, "read")
        return multiple(*issued)

    @precondition(lambda self: self._in(R))
    @rule(target=claims, worker=st.sampled_from(WORKERS), expire_all=st.booleans())
    def take_over(self, worker: str, expire_all: bool) -> Any:
        """XAUTOCLAIM every pending entry (min idle 0) and claim them: live leases are held.

        With ``expire_all`` time first passes for every running saga (see expire_lease).
        """
        if expire_all:
            for rid, m in self.model.items():
                if m.state == R:
                    self.expire_lease(rid)
        issued = []
        for step in STEPS:
            got = self.run(recover_idle(self.sm, step, 0, worker=worker, min_idle_ms=0, count=100))
            assert got.deleted == []
            entries = [(e, text(f[b"rid"])) for e, f in got.entries]
            issued += self._claim(step, entries, worker, "recover")
        return multiple(*issued)

    def _claim(
        self, step: str, entries: list[tuple[str, str]], worker: str, via: str
    ) -> list[tuple[str, Claim]]:
        if not entries:
            return []
        outs = self.run(
            self.sm.claim(
                step, 0, entries, worker=worker, lease_ms=LEASE_MS, max_attempts=MAX_ATTEMPTS
            )
        )
        issued = []
        for (entry, rid), out in zip(entries, outs, strict=True):
            expected = self._predict_claim(self.model[rid], step, entry)
            assert out.code == expected, (rid, entry, out, self.model[rid])
            event(f"claim via {via}: {expected.name}")
            if out.claim is not None:
                assert out.claim.token == self.model[rid].token
                assert out.claim.attempt == self.model[rid].attempts_at(step)
                issued.append((worker, out.claim))
        return issued

    def _predict_claim(self, m: Rec, step: str, entry: str) -> RC:
        if m.entry != entry or m.step != step or m.state not in (P, R):
            return RC.STALE_ENTRY
        if m.state == R and m.lease_live:
            return RC.LEASE_HELD
        if m.state == R and m.attempts_at(step) >= MAX_ATTEMPTS:
            m.state, m.token, m.entry, m.lease_live = F, "", "", False
            return RC.DEAD_LETTERED
        m.seq += 1
        m.attempts[step] = (m.epoch, m.attempts_at(step) + 1)
        m.state, m.token, m.lease_live = R, f"{m.epoch}:{m.seq}", True
        return RC.OK

    @precondition(lambda self: any(m.state == R and m.lease_live for m in self.model.values()))
    @rule(rid=st.sampled_from(RECORDS))
    def expire_lease(self, rid: str) -> None:
        """Time passes for one running saga: its lease deadline is moved to 0."""
        m = self.model[rid]
        if m.state == R:
            self.run(self.client.hset(self.keys.saga(rid), "lease", 0))
            m.lease_live = False

    @rule(held=claims)
    def heartbeat(self, held: tuple[str, Claim]) -> None:
        worker, c = held
        m = self.model[c.record_id]
        live = m.state == R and m.token == c.token
        before = None if live else self.run(snapshot(self.client, self.keys.prefix))
        try:
            self.run(self.sm.heartbeat(c, worker=worker, lease_ms=LEASE_MS))
            assert live, "a stale token's heartbeat was accepted"
            m.lease_live = True
        except StateError as exc:
            assert not live, exc
            assert self.run(snapshot(self.client, self.keys.prefix)) == before

    @rule(held=claims, resend=st.booleans())
    def commit(self, held: tuple[str, Claim], resend: bool) -> None:
        worker, c = held
        m = self.model[c.record_id]
        req = CommitRequest(
            output=b'{"by":"' + worker.encode() + b'"}',
            worker=worker,
            next_step=NEXT[c.step],
            op=uuid.uuid4().hex,
        )
        if m.done.get(c.step) == c.token:
            expected = RC.DUPLICATE
        elif m.state == R and m.step == c.step and m.token == c.token:
            expected = RC.OK
        else:
            expected = RC.LEASE_LOST
        before = self.run(snapshot(self.client, self.keys.prefix))
        out = self.run(self.sm.commit(c, req))
        assert out.code == expected, (out, m)
        event(f"commit: {expected.name}")
        self._check_refusal(c.record_id, expected, before)
        if expected == RC.OK:
            m.done[c.step], m.token, m.lease_live = c.token, "", False
            m.outputs.add(c.step)
            if NEXT[c.step]:
                m.state, m.step, m.entry = P, NEXT[c.step], self._entry_of(c.record_id)
            else:
                m.state, m.entry = C, ""
        if resend:
            self._resend_changes_nothing(lambda: self.sm.commit(c, req))

    @rule(
        held=claims,
        action=st.sampled_from(list(FailAction)),
        due_now=st.booleans(),
        resend=st.booleans(),
    )
    def fail(
        self, held: tuple[str, Claim], action: FailAction, due_now: bool, resend: bool
    ) -> None:
        worker, c = held
        m = self.model[c.record_id]
        delay = 0 if due_now else LATER_MS
        req = FailRequest(
            action=action,
            error_class="E",
            error_message="m",
            delay_ms=delay,
            worker=worker,
            op=uuid.uuid4().hex,
        )
        if m.failtok == c.token:
            expected = RC.DUPLICATE
        elif m.state == R and m.step == c.step and m.token == c.token:
            expected = RC.OK
        else:
            expected = RC.LEASE_LOST
        before = self.run(snapshot(self.client, self.keys.prefix))
        out = self.run(self.sm.fail(c, req))
        assert out.code == expected, (out, m)
        event(f"fail {action.value}: {expected.name}")
        self._check_refusal(c.record_id, expected, before)
        if expected == RC.OK:
            m.failtok, m.token, m.entry, m.lease_live = c.token, "", "", False
            if action == FailAction.DEAD:
                m.state = F
            else:
                m.state, m.due_past = W, due_now
                if action == FailAction.PARK:
                    m.attempts[c.step] = (m.epoch, max(m.attempts_at(c.step) - 1, 0))
        if resend:
            self._resend_changes_nothing(lambda: self.sm.fail(c, req))

    def _check_refusal(self, rid: str, code: RC, before: dict[str, Any]) -> None:
        """A duplicate writes nothing; a stale token writes nothing but one 'fenced' event."""
        if code == RC.OK:
            return
        after = self.run(snapshot(self.client, self.keys.prefix))
        hist = self.keys.history(rid)
        changed = {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)}
        if code == RC.DUPLICATE:
            assert changed == set()
            return
        assert changed == {hist}, changed
        old, new = before[hist]["value"]["entries"], after[hist]["value"]["entries"]
        assert new[: len(old)] == old and len(new) == len(old) + 1
        assert new[-1][1]["e"] == "fenced"

    def _resend_changes_nothing(self, call: Any) -> None:
        before = self.run(snapshot(self.client, self.keys.prefix))
        self.run(call())
        assert self.run(snapshot(self.client, self.keys.prefix)) == before

    @precondition(lambda self: self._in(W))
    @rule(step=st.sampled_from(STEPS), force_due=st.booleans())
    def promote(self, step: str, force_due: bool) -> None:
        waiting = [rid for rid, m in self.model.items() if m.state == W and m.step == step]
        if force_due:
            for rid in waiting:
                self.run(self.client.zadd(self.keys.delayed(0, step), {rid: 0}))
                self.model[rid].due_past = True
        candidates = [rid for rid, _ in self.run(self.sm.due_candidates(step, 0, 100))]
        assert sorted(candidates) == sorted(waiting)
        due = [rid for rid in waiting if self.model[rid].due_past]
        got = self.run(self.sm.promote(step, 0, candidates))
        assert got == (len(due), len(waiting) - len(due))
        for rid in due:
            m = self.model[rid]
            m.state, m.due_past, m.entry = P, False, self._entry_of(rid)

    @rule(
        rid=st.sampled_from(RECORDS),
        from_step=st.sampled_from(STEPS),
        force=st.booleans(),
        resend=st.booleans(),
    )
    def retry(self, rid: str, from_step: str, force: bool, resend: bool) -> None:
        m = self.model[rid]
        op = uuid.uuid4().hex
        call = operator.retry(self.sm, rid, from_step, PREV[from_step], force=force, op=op)
        if m.state is None:
            with pytest.raises(SagaNotFoundError):
                self.run(call)
            return
        if PREV[from_step] not in m.outputs or (m.state == R and m.lease_live and not force):
            before = self.run(snapshot(self.client, self.keys.prefix))
            with pytest.raises(StepConflictError):
                self.run(call)
            assert self.run(snapshot(self.client, self.keys.prefix)) == before
            return
        res = self.run(call)
        m.epoch += 1
        assert res.epoch == m.epoch
        m.state, m.step, m.entry, m.token = P, from_step, res.entry_id, ""
        m.lease_live = m.due_past = False
        if resend:
            again = operator.retry(self.sm, rid, from_step, PREV[from_step], force=force, op=op)
            before = self.run(snapshot(self.client, self.keys.prefix))
            assert self.run(again) == msgspec.structs.replace(res, duplicate=True)
            assert self.run(snapshot(self.client, self.keys.prefix)) == before

    @rule(rid=st.sampled_from(RECORDS))
    def cancel(self, rid: str) -> None:
        m = self.model[rid]
        call = operator.cancel(self.sm, rid)
        if m.state is None:
            with pytest.raises(SagaNotFoundError):
                self.run(call)
        elif m.state == C:
            with pytest.raises(StepConflictError):
                self.run(call)
        else:
            assert self.run(call) == m.state
            m.state, m.token, m.entry, m.lease_live = X, "", "", False

    # -- invariants -----------------------------------------------------------
    @invariant()
    def redis_agrees_with_model_and_invariants_hold(self) -> None:
        k = self.keys
        pipe = self.client.pipeline(transaction=False)
        for rid in RECORDS:
            pipe.hgetall(k.saga(rid))
            pipe.xrange(k.history(rid))
        for step in STEPS:
            pipe.xrange(k.ready(0, step))
            pipe.xpending_range(k.ready(0, step), GROUP, "-", "+", 1000)
            pipe.xinfo_groups(k.ready(0, step))
            pipe.zrange(k.delayed(0, step), 0, -1)
            pipe.xrange(k.dead(0, step))
        for state in SagaState:
            pipe.zrange(k.state_index(0, state), 0, -1)
        replies = iter(self.run(pipe.execute()))
        sagas, hists = {}, {}
        for rid in RECORDS:
            raw = next(replies)
            sagas[rid] = {text(a): text(b) for a, b in raw.items()}
            hists[rid] = [{text(a): text(b) for a, b in f.items()} for _, f in next(replies)]
        streams = {}
        for step in STEPS:
            ready = [text(i) for i, _ in next(replies)]
            pel = {text(r["message_id"]) for r in next(replies)}
            last = text(next(replies)[0]["last-delivered-id"])
            delayed = {text(m) for m in next(replies)}
            dead = {text(i): {text(a): text(b) for a, b in f.items()} for i, f in next(replies)}
            streams[step] = (ready, pel, last, delayed, dead)
        index = {state: {text(m) for m in next(replies)} for state in SagaState}

        for rid in RECORDS:
            self._check_record(rid, sagas[rid], hists[rid])
        self._check_streams(sagas, streams)
        for rid in RECORDS:
            current = sagas[rid].get("state")
            assert {s for s in SagaState if rid in index[s]} == (
                {SagaState(current)} if current else set()
            )

    def _check_record(self, rid: str, h: dict[str, str], hist: list[dict[str, str]]) -> None:
        m = self.model[rid]
        if m.state is None:
            assert h == {} and hist == []
            return
        assert (h["state"], h["step"], int(h["epoch"]), h["token"]) == (
            m.state,
            m.step,
            m.epoch,
            m.token,
        )
        assert h["entry"] == m.entry
        committed = Counter((e["s"], e["ep"]) for e in hist if e["e"] == "committed")
        assert all(n == 1 for n in committed.values()), committed
        state, step, epoch = None, "", 0
        for ev in hist:
            allowed_from, to = TRANSITIONS[ev["e"]]
            assert state in allowed_from, f"{rid}: {ev['e']} after {state}: {hist}"
            if ev["e"] == "started":
                step, epoch = ev["s"], int(ev["ep"])
            elif ev["e"] == "retried":
                assert int(ev["ep"]) == epoch + 1
                step, epoch = ev["s"], epoch + 1
            elif ev["e"] != "fenced":  # a fenced event names the zombie's step
                assert ev["s"] == step, (ev, step)
                assert int(ev.get("ep", epoch)) == epoch, (ev, epoch)  # 'cancelled' has no ep
            if ev["e"] == "committed":
                step, to = (ev["n"], P) if ev["n"] else (step, C)
            state = state if to is SAME else to
        assert (state, step, epoch) == (m.state, m.step, m.epoch)

    def _check_streams(self, sagas: dict[str, dict[str, str]], streams: dict[str, Any]) -> None:
        for step, (ready, pel, last, delayed, dead) in streams.items():
            at_step = {rid: h for rid, h in sagas.items() if h and h["step"] == step}
            running = {h["entry"] for h in at_step.values() if h["state"] == R}
            assert pel == running, (step, pel, running)
            for rid, h in at_step.items():
                if h["state"] == P:
                    assert h["entry"] in ready, (rid, "entry lost", h["entry"])
                    assert _id(h["entry"]) > _id(last), (rid, "delivered but not claimed")
            assert delayed == {rid for rid, h in at_step.items() if h["state"] == W}
            failed = {h["dead_id"]: rid for rid, h in at_step.items() if h["state"] == F}
            assert set(dead) == set(failed), (step, dead, failed)
            for dead_id, rid in failed.items():
                assert dead[dead_id]["rid"] == rid


def _id(entry: str) -> tuple[int, int]:
    ms, _, seq = entry.partition("-")
    return int(ms), int(seq or 0)


def test_state_machine_holds_against_the_model(redis_url: str) -> None:
    """Random interleavings of every transition keep the model's invariants (see module doc)."""
    run_state_machine_as_test(lambda: SagaMachine(redis_url), settings=SETTINGS)  # type: ignore[arg-type]
