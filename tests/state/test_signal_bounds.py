"""Signals kept before the wait are bounded, against a real server: at most KEPT_MAX
kept at once (one per event), SEEN_MAX signal ids remembered, and a kept signal older
than KEPT_MAX_AGE_MS dropped when its wait comes; each refusal is one sentence and
writes nothing. Each bound's mutant script is caught here."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from saga.state import signals
from saga.state.errors import StepConflictError
from saga.state.keys import Keys
from saga.state.machine import StateMachine
from saga.state.model import EventType
from saga.state.reads import get_saga_and_history
from saga.state.requests import CommitRequest
from saga.state.signals import KEPT_MAX, SEEN_MAX, WaitPlan
from tests.state.helpers import claim_next, saga_hash, snapshot
from tests.state.mutants import mutated

pytestmark = pytest.mark.anyio
BOUND_MUTANTS = {
    "no kept bound": (
        "signal_saga.lua",
        "if not s[9] and (tonumber(s[10]) or 0) >= most_kept then",
        "if false then",
    ),
    "no id bound": (
        "signal_saga.lua",
        "if (tonumber(s[11]) or 0) >= most_ids then",
        "if false then",
    ),
    "old signal consumed": (
        "park_wait.lua",
        "(tonumber(ARGV[14]) or 604800000) then kept[1] = nil end",
        "(tonumber(ARGV[14]) or 604800000) then end",
    ),
}


@pytest.fixture
def mutant(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    yield from mutated(monkeypatch, BOUND_MUTANTS, request.param)


@pytest.mark.parametrize("mutant", ["", "no kept bound"], indirect=True)
async def test_at_most_kept_max_signals_are_kept(sm: StateMachine, keys: Keys, mutant: str) -> None:
    """KEPT_MAX events kept; one more event is refused in one sentence, nothing written;
    another signal of a kept event is still 'dropped' as before."""
    await sm.start("r1", "u1", "router")
    for i in range(KEPT_MAX):
        res = await signals.signal(sm, "r1", f"ev{i}", signal_id=f"s{i}")
        assert res.outcome == "kept"
    before = await snapshot(sm.client, keys.prefix)
    if mutant:
        res = await signals.signal(sm, "r1", "one_more", signal_id="s-more")
        assert res.outcome == "kept"  # the mutant keeps it: the bound is gone
        return
    with pytest.raises(StepConflictError, match=f"keeps {KEPT_MAX} signals"):
        await signals.signal(sm, "r1", "one_more", signal_id="s-more")
    assert await snapshot(sm.client, keys.prefix) == before
    res = await signals.signal(sm, "r1", "ev0", signal_id="s-again")
    assert res.outcome == "dropped"


@pytest.mark.parametrize("mutant", ["", "no id bound"], indirect=True)
async def test_at_most_seen_max_signal_ids(sm: StateMachine, keys: Keys, mutant: str) -> None:
    """With SEEN_MAX ids remembered a new id is refused; a resend of a known one is still
    a no-op ('seen')."""
    await sm.start("r1", "u1", "router")
    await signals.signal(sm, "r1", "approved", signal_id="known")
    await sm.client.hset(keys.saga("r1"), "nsi", SEEN_MAX)  # as if SEEN_MAX had come
    res = await signals.signal(sm, "r1", "approved", signal_id="known")
    assert res.outcome == "seen"
    if mutant:
        res = await signals.signal(sm, "r1", "approved", signal_id="new")
        assert res.outcome == "dropped"
        return
    with pytest.raises(StepConflictError, match=f"{SEEN_MAX} signals already"):
        await signals.signal(sm, "r1", "approved", signal_id="new")


@pytest.mark.parametrize("mutant", ["", "old signal consumed"], indirect=True)
async def test_a_kept_signal_too_old_is_dropped_at_the_wait(
    sm: StateMachine, keys: Keys, mutant: str
) -> None:
    """A signal kept longer than KEPT_MAX_AGE_MS is not consumed: the saga parks and
    waits for a fresh one; the kept count goes back to 0."""
    await sm.start("r1", "u1", "router")
    await signals.signal(sm, "r1", "approved", data=b'{"by":"old"}', signal_id="s-old")
    await sm.client.hset(keys.saga("r1"), "sgt:approved", 1)  # kept in 1970
    c = await claim_next(sm, "router", "w-a")
    await sm.commit(c, CommitRequest(output=b"{}", next_step="parser"))
    w = await claim_next(sm, "parser", "w-a", prev_step="router")
    out = await signals.park(sm, w, WaitPlan(event="approved", next_step="grouper"), worker="w")
    h = await saga_hash(sm.client, keys, "r1")
    if mutant:
        assert out.state == "pending"  # consumed the stale signal
        return
    assert (out.state, h["state"], h["nsk"]) == ("waiting", "waiting", "0")
    assert "sig:approved" not in h and "sgt:approved" not in h
    _, events = await get_saga_and_history(sm.client, keys, "r1")
    expired, waiting = events[-2:]
    assert (expired.event, expired.step, expired.detail) == (
        EventType.SIGNAL_EXPIRED, "parser", "approved s-old",
    )  # fmt: skip
    assert waiting.event == EventType.WAITING
