"""Maps hold against the model of tests/state/stateful_map.py (random interleavings of
spawns, item claims, commits, failures, retries, heartbeats, cancels and operator
retries, with on_failure "fail" and "partial"), and each mutant of a map script is
caught by a short scenario that the real scripts pass."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import run_state_machine_as_test

from saga.state.model import Claim
from tests.state.mutants import mutated
from tests.state.stateful_map import MapMachine, PartialMapMachine
from tests.state.stateful_map_undo import UndoMapMachine

SOAK = os.environ.get("SAGA_SOAK", "").lower() in ("1", "true", "yes")
SETTINGS = settings(
    max_examples=300 if SOAK else 50, stateful_step_count=60 if SOAK else 40, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)  # fmt: skip
"""``SAGA_SOAK=1`` runs more examples, each longer."""


@pytest.mark.parametrize("machine", [MapMachine, PartialMapMachine, UndoMapMachine])
def test_maps_hold_against_the_model(redis_url: str, machine: type[MapMachine]) -> None:
    """Random interleavings keep the model's word: each item commits once per epoch, at
    most 2 are open, the fan-in fires once with the outputs in item order; with a
    compensation on the map, each committed item is undone once, latest first."""
    steps = {"stateful_step_count": 80} if machine is UndoMapMachine and not SOAK else {}
    # the undo machine's rules begin once items committed: longer runs reach them more
    run_state_machine_as_test(lambda: machine(redis_url), settings=settings(SETTINGS, **steps))  # type: ignore[arg-type]


MUTANTS = {
    "a cancelled saga's item is claimed": (
        "claim_items.lua",
        "local live = s[3] == STATE.RUNNING and s[4] == m and c ~= nil",
        "local live = c ~= nil",
    ),
    "a running item's live lease is taken over": (
        "claim_items.lua",
        "if takeover and tonumber(s[14]) > now then",
        "if false then",
    ),
    "the controller's requeue drops a running item's entry": (
        "requeue_items.lua",
        "local live = s[1] == STATE.RUNNING and s[2] == m and s[3] == ep",
        "local live = false and s[3] == ep",
    ),
    "a zombie item's commit is taken": (
        "commit_items.lua",
        "or item_state(s[6], epoch) ~= 'r' or s[7] ~= token then\n  fenced(saga, hist, ready, "
        "group, entry, maxlen, m .. '[' .. i .. ']', token, worker, now_s,\n         s[8], op,",
        "or item_state(s[6], epoch) ~= 'r' then\n  fenced(saga, hist, ready, "
        "group, entry, maxlen, m .. '[' .. i .. ']', token, worker, now_s,\n         s[8], op,",
    ),
    "an item's retry ends it for good": (
        "fail_items.lua",
        "if action == 'dead' then",
        "if action ~= 'park' then",
    ),
    "a cancelled saga's item heartbeat extends its lease": (
        "extend_item.lua",
        "if s[1] ~= STATE.RUNNING or s[2] ~= m or",
        "if s[2] ~= m or",
    ),
    "a promoted retry stays in the set": (
        "promote_items.lua",
        "  redis.call('ZREM', KEYS[1], member)\n",
        "",
    ),
    "the fan-in fires before the last item": (
        "includes/map_items.lua",
        "if c.done + c.failed >= c.n then",
        "if c.done + c.failed >= 1 then",
    ),
    "the concurrency bound is ignored": (
        "includes/map_items.lua",
        "if c.open >= conc or c.next >= c.n then break end",
        "if c.next >= c.n then break end",
    ),
}


@pytest.fixture
def mutant(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    yield from mutated(monkeypatch, MUTANTS, request.param)


def _items(m: MapMachine) -> list[Claim]:
    return list(m.claim().values)  # type: ignore[attr-defined]


def _scenario(m: MapMachine, name: str) -> None:
    """The short run that shows the mutant ``name`` (or passes with the real scripts)."""
    m.start("r0", 4 if name == "the concurrency bound is ignored" else 2)
    m.over()
    assert _items(m) == []  # the spawn: its items' entries follow
    m.redis_agrees_with_the_model()
    if name == "a cancelled saga's item is claimed":
        m.cancel("r0")
        assert _items(m) == []
        return
    a, b = _items(m)
    m.redis_agrees_with_the_model()
    if name == "a running item's live lease is taken over":
        m.recover()
    if name == "the controller's requeue drops a running item's entry":
        m.requeue()
    if name == "a cancelled saga's item heartbeat extends its lease":
        m.heartbeat(a)
        m.cancel("r0")
        m.heartbeat(a)
        return
    if name in ("a zombie item's commit is taken", "an item's retry ends it for good",
                "a promoted retry stays in the set"):  # fmt: skip
        m.fail(a, dead=False)
        m.redis_agrees_with_the_model()
        m.promote()
        m.promote()
        (again,) = _items(m)
        m.commit(a)  # the attempt before the retry: fenced
        m.redis_agrees_with_the_model()
        a = again
    m.commit(a)
    m.redis_agrees_with_the_model()
    m.commit(a)  # re-sent: a duplicate
    if name == "the concurrency bound is ignored":
        (c,) = _items(m)  # one released by a's end
        m.commit(b), m.commit(c), m.commit(_items(m)[0])
    else:
        m.commit(b)  # the last item: the fan-in
    m.redis_agrees_with_the_model()
    m.join()
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
def _machine(url: str) -> Iterator[MapMachine]:
    m = MapMachine(url)
    try:
        yield m
    finally:
        m.teardown()


UNDO_MUTANTS = {
    "an item is undone twice": (
        "includes/undo_plan.lua",
        "if r[3 * j + 1] == e .. ':d' and not (mu and string.sub(mu, 1, #e + 1) == e .. '|') then",
        "if r[3 * j + 1] == e .. ':d' then",
    ),
    "a failed item is undone": (
        "includes/undo_plan.lua",
        "if r[3 * j + 1] == e .. ':d' and not (mu",
        "if r[3 * j + 1] and not (mu",
    ),
    "an undo's commit leaves its item unmarked": (
        "commit_undo.lua",
        "  redis.call('HSET', saga, 'mu:' .. undone .. ':' .. item, run .. '|' .. token)\n",
        "",
    ),
}


@pytest.fixture
def undo_mutant(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    yield from mutated(monkeypatch, UNDO_MUTANTS, request.param)


def _undo_scenario(m: UndoMapMachine, name: str) -> None:
    """Two items; the short run that shows the undo mutant ``name``."""
    m.start("r0", 2)
    m.over()
    assert _items(m) == []
    a, b = _items(m)
    m.commit(a)
    m.each_item_is_undone_once()
    if name == "a failed item is undone":
        m.fail(b, dead=True)  # compensating: a only (b failed)
        m.redis_agrees_with_the_model()
        m.each_item_is_undone_once()
        (u,) = m.undo_claim().values  # type: ignore[attr-defined]
        m.undo_commit(u)
        m.each_item_is_undone_once()
        return
    m.commit(b)
    m.join_fails()  # compensating: b, then a
    m.each_item_is_undone_once()
    (u,) = m.undo_claim().values  # type: ignore[attr-defined]
    m.undo_commit(u)
    m.undo_commit(u)  # re-sent: a duplicate
    m.each_item_is_undone_once()
    (u,) = m.undo_claim().values  # type: ignore[attr-defined]
    m.undo_fail(u)  # compensation_failed
    m.compensate("r0")  # resumes: the item not undone yet, only
    m.redis_agrees_with_the_model()
    m.each_item_is_undone_once()
    (u,) = m.undo_claim().values  # type: ignore[attr-defined]
    m.undo_commit(u)
    m.redis_agrees_with_the_model()
    m.each_item_is_undone_once()


@pytest.mark.parametrize("undo_mutant", list(UNDO_MUTANTS), indirect=True)
def test_each_undo_mutant_is_caught(redis_url: str, undo_mutant: str) -> None:
    """The real scripts pass each scenario; on its mutant (an item undone twice, a failed
    item undone, an undone item left unmarked), a rule's or the invariant's check fails."""
    m = UndoMapMachine(redis_url)
    try:
        with pytest.raises(AssertionError):
            _undo_scenario(m, undo_mutant)
    finally:
        m.teardown()


@pytest.mark.parametrize("name", list(UNDO_MUTANTS))
def test_each_undo_scenario_passes_with_the_real_scripts(redis_url: str, name: str) -> None:
    """The scenarios the undo mutants fail hold with the real scripts."""
    m = UndoMapMachine(redis_url)
    try:
        _undo_scenario(m, name)
    finally:
        m.teardown()
