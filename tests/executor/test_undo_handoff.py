"""A claim that dead-letters a saga hands it on to compensation (saga/worker/undo_handoff.py):
only for a step that is not itself an undo, only when something can be undone, and a
saga that moved on meanwhile is left as it is."""

from __future__ import annotations

from typing import Any

import pytest

from saga.state.codes import RC
from saga.state.keys import Keys
from saga.state.machine import StateMachine
from saga.state.model import FailAction
from saga.state.requests import CommitRequest, FailRequest
from saga.state.streams import ensure_groups
from saga.worker.undo_handoff import UndoHandoff
from tests.state.helpers import NEXT, STEPS, claim_next, saga_hash, stream_rows

pytestmark = pytest.mark.anyio
UNDOABLE = ("grouper", "router")  # latest first; the parser has nothing to undo


@pytest.fixture
async def sm(redis: Any, keys: Keys) -> StateMachine:
    await ensure_groups(redis, keys, [*STEPS, *(f"undo:{s}" for s in UNDOABLE)])
    return StateMachine(redis, keys)


async def _failed_at_parser(sm: StateMachine, rid: str) -> None:
    """A saga whose router committed and whose parser is dead-lettered with no plan (as
    a claim's lease-expiry dead letter leaves it: failed, nothing undone yet)."""
    await sm.start(rid, "u1", "router", input_json=b'{"doc":"a"}')
    c = await claim_next(sm, "router", "w-a")
    done = await sm.commit(c, CommitRequest(output=b"{}", next_step=NEXT["router"], worker="w-a"))
    assert done.code == RC.OK
    c = await claim_next(sm, "parser", "w-a")
    req = FailRequest(action=FailAction.DEAD, error_class="E", error_message="boom", undo=())
    assert (await sm.fail(c, req)).code == RC.OK
    assert (await saga_hash(sm.client, sm.keys, rid))["state"] == "failed"


async def test_a_dead_lettered_saga_starts_undoing_what_it_committed(
    sm: StateMachine, keys: Keys
) -> None:
    """Dead at the parser: compensating, with the router's undo enqueued."""
    await _failed_at_parser(sm, "r1")
    await UndoHandoff(sm, UNDOABLE, "w-a").dead_lettered("parser", "r1")
    h = await saga_hash(sm.client, keys, "r1")
    assert (h["state"], h["step"]) == ("compensating", "undo:router")
    assert len(await stream_rows(sm.client, keys.ready(0, "undo:router"))) == 1


@pytest.mark.parametrize(
    ("step", "undoable"), [("undo:router", UNDOABLE), ("parser", ())], ids=["undo", "none"]
)
async def test_nothing_is_undone_for_an_undo_or_without_compensations(
    sm: StateMachine, keys: Keys, step: str, undoable: tuple[str, ...]
) -> None:
    """An undo's own dead letter is final, and a pipeline without compensations has
    nothing to undo: the saga stays failed."""
    await _failed_at_parser(sm, "r1")
    await UndoHandoff(sm, undoable, "w-a").dead_lettered(step, "r1")
    assert (await saga_hash(sm.client, keys, "r1"))["state"] == "failed"
    assert await stream_rows(sm.client, keys.ready(0, "undo:router")) == []


async def test_a_saga_that_moved_on_is_left_as_it_is(sm: StateMachine, keys: Keys) -> None:
    """A completed saga refuses compensation: the hand-off logs it and raises nothing."""
    await sm.start("r2", "u1", "router", input_json=b"{}")
    for step in STEPS:
        c = await claim_next(sm, step, "w-a")
        req = CommitRequest(output=b"{}", next_step=NEXT[step], worker="w-a")
        assert (await sm.commit(c, req)).code == RC.OK
    await UndoHandoff(sm, UNDOABLE, "w-a").dead_lettered("parser", "r2")
    assert (await saga_hash(sm.client, keys, "r2"))["state"] == "completed"
