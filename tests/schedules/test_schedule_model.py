"""A hypothesis state machine drives the schedule scripts and the fire pass against a
small Python model: add (same or another definition, replace), pause, resume, rm, time
passing, fires (one controller, two controllers on one tick, a fire killed between the
start and the advance, a late fire of a tick already moved on). After every rule Redis
agrees with the model, and each tick fired started exactly one saga. A mutant of each
script's fence (the advance that does not check the tick; a resume that moves an active
schedule; a pause that leaves the tick) is caught by a scripted run of the same machine.
"""

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

from saga.api.client import SagaClient
from saga.api.schedules import next_fire
from saga.config.settings import Settings
from saga.controller.firing import Firing
from saga.state import schedules as store
from saga.state.connection import connect
from saga.state.errors import SagaNotFoundError
from saga.state.keys import Keys
from saga.state.streams import ensure_groups
from tests.executor import pipelines
from tests.state.helpers import keys_under
from tests.state.mutants import mutated

T0 = 1_767_405_600_000
MINUTE = 60_000
NAMES = ("s0", "s1")
CRONS = ("* * * * *", "*/5 * * * *")


@dataclass
class Sched:
    cron: str
    next: int | None  # None: paused


@dataclass
class Model:
    now: int = T0
    scheds: dict[str, Sched] = field(default_factory=dict)
    started: set[str] = field(default_factory=set)
    """Record ids of the ticks fired (one saga each)."""


class ScheduleMachine(RuleBasedStateMachine):
    def __init__(self, url: str) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.client = connect(url)
        self.keys = Keys(prefix=f"s{uuid.uuid4().hex[:10]}", partitions=1)
        self.model = Model()
        self.sagas = SagaClient(self.client, self.keys, pipelines.pipeline(), Settings())
        self.firing = Firing(self.client, self.keys, Settings(), own=pipelines.pipeline())
        self.run(ensure_groups(self.client, self.sagas.keys, list(pipelines.STEPS)))

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

    def definition(self, cron: str) -> store.ScheduleDefinition:
        return store.ScheduleDefinition(cron=cron, saga_type="documents", user_id="lab")

    @rule(name=st.sampled_from(NAMES), cron=st.sampled_from(CRONS), replace=st.booleans())
    def add(self, name: str, cron: str, replace: bool) -> None:
        first = next_fire(cron, self.model.now)
        m = self.model.scheds.get(name)
        try:
            d = self.definition(cron)
            changed, nxt = self.run(
                store.add(self.client, self.keys, name, d, first, replace=replace)
            )
        except store.ScheduleExistsError:
            assert m is not None and m.cron != cron and not replace
            return
        if m is None:
            self.model.scheds[name] = Sched(cron, first)
            assert (changed, nxt) == (True, first)
        elif m.cron == cron:
            assert (changed, nxt) == (False, m.next if m.next is not None else -1)
        else:
            assert replace and changed
            if m.next is not None:
                m.next = first
            m.cron = cron
            assert nxt == (m.next if m.next is not None else -1)

    @rule(name=st.sampled_from(NAMES))
    def pause(self, name: str) -> None:
        m = self.model.scheds.get(name)
        try:
            was = self.run(store.pause(self.client, self.keys, name))
        except SagaNotFoundError:
            assert m is None
            return
        assert m is not None and was == (m.next is not None)
        m.next = None

    @rule(name=st.sampled_from(NAMES))
    def resume(self, name: str) -> None:
        m = self.model.scheds.get(name)
        nxt = next_fire(m.cron if m else CRONS[0], self.model.now)
        try:
            was, at = self.run(store.resume(self.client, self.keys, name, nxt))
        except SagaNotFoundError:
            assert m is None
            return
        assert m is not None and was == (m.next is None)
        if m.next is None:
            m.next = nxt
        assert at == m.next

    @rule(name=st.sampled_from(NAMES))
    def remove(self, name: str) -> None:
        try:
            self.run(store.remove(self.client, self.keys, name))
        except SagaNotFoundError:
            assert name not in self.model.scheds
            return
        del self.model.scheds[name]

    @rule(minutes=st.integers(0, 12))
    def time_passes(self, minutes: int) -> None:
        self.model.now += minutes * MINUTE + 7

    def _fired(self, name: str, tick: int) -> None:
        """The model of one fire of ``tick``: its saga once, the next tick after now."""
        self.model.started.add(store.record_id_of(name, tick))
        m = self.model.scheds[name]
        m.next = next_fire(m.cron, max(tick, self.model.now))

    @rule(doubled=st.booleans())
    def fire_pass(self, doubled: bool) -> None:
        """One controller's pass (or two controllers that both read the due ticks)."""
        due = self.run(store.due(self.client, self.keys, self.model.now))
        want = sorted((n, s.next) for n, s in self.model.scheds.items()
                      if s.next is not None and s.next <= self.model.now)  # fmt: skip
        assert sorted(due) == want
        for name, tick in due:
            self.run(self.firing.fire(name, tick, self.model.now))
            if doubled:  # the second controller's fire of the same tick
                other = Firing(self.client, self.keys, Settings(), own=pipelines.pipeline())
                assert self.run(other.fire(name, tick, self.model.now)) == 0
            self._fired(name, tick)

    @rule(name=st.sampled_from(NAMES))
    def fire_killed_after_start(self, name: str) -> None:
        """The tick's saga started, then the process died before the advance."""
        m = self.model.scheds.get(name)
        if m is None or m.next is None or m.next > self.model.now:
            return
        rid = store.record_id_of(name, m.next)
        self.run(self.sagas.start(rid, "lab"))
        self.model.started.add(rid)

    @rule(name=st.sampled_from(NAMES), back=st.integers(1, 10))
    def late_fire_of_an_old_tick(self, name: str, back: int) -> None:
        """A controller that read a tick long ago fires it now: the fence refuses the
        advance (its saga may start, under that old tick's record id)."""
        m = self.model.scheds.get(name)
        if m is None or m.next is None:
            return
        old = m.next - back * MINUTE
        rid = store.record_id_of(name, old)
        moved = self.run(store.advance(self.client, self.keys, name, old, old + 1, rid))
        assert not moved

    @invariant()
    def redis_agrees_with_the_model(self) -> None:
        rows = {r.name: r for r in self.run(store.listing(self.client, self.keys))}
        assert set(rows) == set(self.model.scheds)
        for name, m in self.model.scheds.items():
            r = rows[name]
            assert (r.cron, r.paused) == (m.cron, m.next is None), (name, r, m)
            assert r.next_ms == (m.next or 0), (name, r, m)

    @invariant()
    def each_tick_fired_started_one_saga(self) -> None:
        ready = self.sagas.keys.ready(0, "router")
        assert self.run(self.client.xlen(ready)) == len(self.model.started)
        for rid in self.model.started:
            assert self.run(self.client.hget(self.sagas.keys.saga(rid), "epoch")) == b"1"


SETTINGS = settings(max_examples=40, stateful_step_count=30, deadline=None,
                    suppress_health_check=list(HealthCheck))  # fmt: skip


def test_schedules_hold_against_the_model(redis_url: str) -> None:
    """Random runs of every rule agree with the model and start each tick once."""
    run_state_machine_as_test(lambda: ScheduleMachine(redis_url), settings=SETTINGS)  # type: ignore[arg-type]


MUTANTS = {
    "advance not fenced": (
        "advance_schedule.lua",
        "if not score or tonumber(score) ~= tonumber(ARGV[2]) then",
        "if false then",
    ),
    "resume moves an active schedule": (
        "resume_schedule.lua",
        "if score then return {RC.DUPLICATE, tonumber(score)} end",
        "",
    ),
    "pause keeps the tick": (
        "pause_schedule.lua",
        "if redis.call('ZREM', due, name) == 0 then return {RC.DUPLICATE} end",
        "",
    ),
}


@pytest.fixture
def mutant(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    yield from mutated(monkeypatch, MUTANTS, request.param)


def _scenario(m: ScheduleMachine) -> None:
    """Add, pass a tick, fire, a late fire of an old tick, pause, resume while active."""
    m.add("s0", CRONS[0], replace=False)
    m.time_passes(2)
    m.fire_pass(doubled=True)
    m.redis_agrees_with_the_model()
    m.each_tick_fired_started_one_saga()
    m.late_fire_of_an_old_tick("s0", 1)
    m.redis_agrees_with_the_model()
    m.resume("s0")
    m.redis_agrees_with_the_model()
    m.pause("s0")
    m.redis_agrees_with_the_model()
    m.time_passes(3)
    m.fire_pass(doubled=False)
    m.each_tick_fired_started_one_saga()


@pytest.mark.parametrize("mutant", ["", *MUTANTS], indirect=True)
def test_a_broken_fence_is_caught(redis_url: str, mutant: str) -> None:
    """The real scripts pass the scenario; each mutant fails one of its checks."""
    m = ScheduleMachine(redis_url)
    try:
        if not mutant:
            _scenario(m)
            return
        with pytest.raises(AssertionError):
            _scenario(m)
    finally:
        m.teardown()
