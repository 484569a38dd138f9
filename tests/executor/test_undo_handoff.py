"""A claim that dead-letters a saga hands it on to compensation (saga/worker/undo_handoff.py
names the steps to undo to every claim): only for a step that is not itself an undo,
only when something can be undone, and in the claim script itself."""

from __future__ import annotations

from typing import Any

import pytest

from saga.state.codes import RC
from saga.state.keys import Keys
from saga.state.machine import StateMachine
from saga.state.recovery import recover_idle
from saga.state.requests import CommitRequest
from saga.state.streams import ensure_groups
from saga.worker.undo_handoff import UndoHandoff
from tests.state.helpers import NEXT, STEPS, claim_next, saga_hash, stream_rows, wait_lease_expired

pytestmark = pytest.mark.anyio
UNDOABLE = ("grouper", "router")  # latest first; the parser has nothing to undo


@pytest.fixture
async def sm(redis: Any, keys: Keys) -> StateMachine:
    await ensure_groups(redis, keys, [*STEPS, *(f"undo:{s}" for s in UNDOABLE)])
    return StateMachine(redis, keys)


async def _parser_lease_lost(sm: StateMachine, rid: str, undoable: tuple[str, ...]) -> Any:
    """A saga whose router committed and whose parser attempt lost its lease, taken over
    by a claim that allows one expiry: that claim dead-letters it."""
    await sm.start(rid, "u1", "router", input_json=b'{"doc":"a"}')
    c = await claim_next(sm, "router", "w-a")
    done = await sm.commit(c, CommitRequest(output=b"{}", next_step=NEXT["router"], worker="w-a"))
    assert done.code == RC.OK
    c = await claim_next(sm, "parser", "w-a", lease_ms=1)
    await wait_lease_expired(sm.client, c.lease_until_ms)
    got = await recover_idle(sm, "parser", 0, worker="w-b", min_idle_ms=0)
    entries = [(e, f[b"rid"].decode()) for e, f in got.entries]
    [out] = await sm.claim("parser", 0, entries, worker="w-b", lease_ms=60_000,
                           max_lease_expiries=1, prev_step="router",
                           undoable=UndoHandoff(undoable).for_claim("parser"))  # fmt: skip
    assert out.code == RC.DEAD_LETTERED
    return out


async def test_a_dead_lettered_saga_starts_undoing_what_it_committed(
    sm: StateMachine, keys: Keys
) -> None:
    """Dead at the parser: compensating in the claim's own script, the router's undo
    enqueued, no dead letter."""
    out = await _parser_lease_lost(sm, "r1", UNDOABLE)
    assert out.detail == "compensating"
    h = await saga_hash(sm.client, keys, "r1")
    assert (h["state"], h["step"]) == ("compensating", "undo:router")
    assert len(await stream_rows(sm.client, keys.ready(0, "undo:router"))) == 1
    assert await stream_rows(sm.client, keys.dead(0, "parser")) == []


async def test_nothing_is_undone_without_compensations(sm: StateMachine, keys: Keys) -> None:
    """A pipeline without compensations has nothing to undo: the saga is failed and
    dead-lettered."""
    out = await _parser_lease_lost(sm, "r1", ())
    assert out.detail == "failed"
    assert (await saga_hash(sm.client, keys, "r1"))["state"] == "failed"
    assert await stream_rows(sm.client, keys.ready(0, "undo:router")) == []


def test_an_undo_names_nothing_to_undo() -> None:
    """An undo's own dead letter ends compensation (compensation_failed): its claims name
    no steps to undo."""
    handoff = UndoHandoff(UNDOABLE)
    assert handoff.for_claim("undo:router") == ()
    assert handoff.for_claim("parser") == UNDOABLE
