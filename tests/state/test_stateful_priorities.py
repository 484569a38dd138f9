"""A hypothesis state machine drives priorities (start_saga with a priority, claim_steps'
lowering and release, release_lowered) against a small Python model of the router's
stream: which sagas wait undelivered in it and in what order, which are lowered, which
are urgent, which were claimed. Every claim's outcome is predicted entry by entry; after
every rule Redis agrees with the model and no saga is lost (each is claimed, in the
stream, or lowered). Mutants of the scripts (urgent sagas lowered too, an urgent saga
never struck off when claimed, a release that drops what it takes, no age bound) are
caught by scripted runs of the same machine or of the age-bound check."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test

from saga.state.codes import RC
from saga.state.connection import connect
from saga.state.keys import Keys
from saga.state.limits import StateLimits
from saga.state.machine import StateMachine
from saga.state.replies import text
from saga.state.streams import ensure_groups
from tests.state.helpers import LEASE_MS, MAX_LEASE_EXPIRIES, STEPS, keys_under, read_ready
from tests.state.mutants import mutated

RECORDS = tuple(f"r{i}" for i in range(8))
BOUND_MS = 600_000  # no saga in a run ages past it


@dataclass
class Model:
    stream: list[str] = field(default_factory=list)
    """Undelivered entries of the router's stream, in order (record ids)."""
    urgent: set[str] = field(default_factory=set)
    lowered: dict[str, int] = field(default_factory=dict)
    """record -> its saga's creation ms (the release order)."""
    claimed: set[str] = field(default_factory=set)
    created: dict[str, int] = field(default_factory=dict)
    priority: dict[str, int] = field(default_factory=dict)


class PriorityMachine(RuleBasedStateMachine):
    def __init__(self, url: str) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.client = connect(url)
        self.keys = Keys(prefix=f"q{uuid.uuid4().hex[:10]}", partitions=1)
        self.sm = StateMachine(self.client, self.keys, StateLimits(priority_boost_ms=BOUND_MS))
        self.model = Model()
        self.run(ensure_groups(self.client, self.keys, STEPS))

    def run(self, aw: Any) -> Any:
        return self.loop.run_until_complete(aw)

    def teardown(self) -> None:
        try:
            stale = self.run(keys_under(self.client, self.keys.prefix))
            if stale:
                self.run(self.client.delete(*stale))
            self.run(self.client.aclose())
        finally:
            self.loop.close()

    @rule(rid=st.sampled_from(RECORDS), priority=st.sampled_from([0, 0, 1, 9]))
    def start(self, rid: str, priority: int) -> None:
        res = self.run(self.sm.start(rid, "u-1", "router", input_json=b"{}", priority=priority))
        if rid in self.model.created:
            assert not res.created  # the first start's priority stays
            return
        m = self.model
        m.created[rid], m.priority[rid] = res.created_ms, priority
        m.stream.append(rid)
        if priority:
            m.urgent.add(rid)

    def _release(self) -> None:
        """The end of a claim (and release_lowered): every lowered entry back, oldest
        creation first, when no urgent saga waits (none ages past the bound here)."""
        m = self.model
        if not m.urgent:
            back = sorted(m.lowered, key=lambda r: (m.lowered[r], f"{r}|1"))
            m.stream += back
            m.lowered.clear()

    @rule(count=st.integers(1, 4))
    def claim(self, count: int) -> None:
        m = self.model
        entries = self.run(read_ready(self.client, self.keys, "router", "w1", count=count))
        assert [rid for _, rid in entries] == m.stream[: len(entries)]
        del m.stream[: len(entries)]
        call = self.sm.claim(
            "router", 0, entries, worker="w1", lease_ms=LEASE_MS,
            max_lease_expiries=MAX_LEASE_EXPIRIES, prev_step="_input",
        )  # fmt: skip
        outs = self.run(call)
        for (_, rid), out in zip(entries, outs, strict=True):
            if m.priority[rid] == 0 and m.urgent:
                assert out.code == RC.DEFERRED, (rid, out, m)
                m.lowered[rid] = m.created[rid]
            else:
                assert out.code == RC.OK, (rid, out, m)
                m.claimed.add(rid)
                m.urgent.discard(rid)
        self._release()

    @rule()
    def release_lowered(self) -> None:
        before = len(self.model.lowered)
        released = self.run(self.sm.release_lowered("router", 0))
        self._release()
        assert released == (before - len(self.model.lowered))

    @invariant()
    def redis_agrees_and_nothing_is_lost(self) -> None:
        m, k = self.model, self.keys
        urgent = {text(r) for r in self.run(self.client.zrange(k.urgent(0, "router"), 0, -1))}
        assert urgent == m.urgent
        low = {text(r) for r in self.run(self.client.zrange(k.lowered(0, "router"), 0, -1))}
        assert low == {f"{r}|1" for r in m.lowered}
        assert set(m.created) == m.claimed | set(m.stream) | set(m.lowered)
        assert len(m.stream) + len(m.lowered) + len(m.claimed) == len(m.created)
        for rid in m.lowered:
            assert text(self.run(self.client.hget(k.saga(rid), "entry"))) == ""


SETTINGS = settings(max_examples=40, stateful_step_count=30, deadline=None,
                    suppress_health_check=list(HealthCheck))  # fmt: skip


def test_priorities_hold_against_the_model(redis_url: str) -> None:
    """Random starts, claims and releases agree with the model, and lose no saga."""
    run_state_machine_as_test(lambda: PriorityMachine(redis_url), settings=SETTINGS)  # type: ignore[arg-type]


MUTANTS = {
    "urgent lowered too": (
        "claim_steps.lua",
        "if boost <= 0 or (s[21] and s[21] ~= '' and s[21] ~= '0') then return false end",
        "if boost <= 0 then return false end",
    ),
    "urgent never struck off": (
        "claim_steps.lua",
        "and redis.call('ZREM', urgent, record) == 1 then",
        "and false then",
    ),
    "release drops entries": (
        "includes/lowered.lua",
        "    redis.call('XADD', ready, '*', 'rid', string.sub(m, 1, bar - 1),\n"
        "               'ep', string.sub(m, bar + 1), 'v', SCHEMA_VERSION)\n",
        "",
    ),
    "no age bound": (
        "claim_steps.lua",
        "  if now - tonumber(s[13]) >= boost then return false end  -- the age boost\n",
        "",
    ),
}


@pytest.fixture
def mutant(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    yield from mutated(monkeypatch, MUTANTS, request.param)


def _scenario(m: PriorityMachine) -> None:
    """Two priority-0 sagas, an urgent one, claims one at a time, then the rest."""
    m.start("r0", 0)
    m.start("r1", 0)
    m.start("r2", 9)
    m.claim(1)
    m.redis_agrees_and_nothing_is_lost()
    m.claim(2)
    m.redis_agrees_and_nothing_is_lost()
    m.start("r3", 0)
    m.claim(4)
    m.redis_agrees_and_nothing_is_lost()
    m.release_lowered()
    m.redis_agrees_and_nothing_is_lost()
    assert m.model.claimed == {"r0", "r1", "r2", "r3"}


async def _age_bound_holds(url: str) -> None:
    """As tests/state/test_priorities.py's age-bound test, in this module's loop."""
    from tests.state.test_priorities import test_the_age_bound_lets_old_sagas_through

    client = connect(url)
    try:
        await test_the_age_bound_lets_old_sagas_through(
            client, Keys(prefix=f"q{uuid.uuid4().hex[:10]}", partitions=1)
        )
    finally:
        await client.aclose()


@pytest.mark.parametrize("mutant", ["", *MUTANTS], indirect=True)
def test_a_broken_priority_is_caught(redis_url: str, mutant: str) -> None:
    """The real scripts pass both checks; each mutant fails one of them."""
    m = PriorityMachine(redis_url)

    def both() -> None:
        _scenario(m)
        m.loop.run_until_complete(_age_bound_holds(redis_url))

    try:
        if not mutant:
            both()
            return
        with pytest.raises(AssertionError):
            both()
    finally:
        m.teardown()
