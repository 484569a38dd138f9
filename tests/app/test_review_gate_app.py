"""docs/sagas.md's gate.py, saved as written, under a real worker: a clean letter passes
the review gate, a flagged one waits there until its review is accepted; and what
``app.review_gate`` refuses when the app is built."""

from __future__ import annotations

import importlib
import os
import re
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest

import saga
from saga.config.settings import Settings
from saga.state.model import EventType
from tests.executor.conftest import SpawnWorker
from tests.executor.support import saga_and_history, states, wait_until

pytestmark = pytest.mark.anyio

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "sagas.md"


async def test_the_docs_gate_holds_a_flagged_saga_until_its_review(
    spawn: SpawnWorker, settings: Settings, redis: Any, tmp_path: Path
) -> None:
    code = re.search(r"```python\n(# gate\.py\n.*?)```", DOC.read_text(), re.S)
    assert code, "docs/sagas.md lost its gate.py example"
    (tmp_path / "gate.py").write_text(code.group(1))
    worker = spawn("gate:app", PYTHONPATH=f"{REPO}{os.pathsep}{tmp_path}")
    await worker.wait_ready(within=120)
    sys.path.insert(0, str(tmp_path))
    try:
        app = importlib.import_module("gate").app
    finally:
        sys.path.remove(str(tmp_path))
    assert app.build().names == ("check", "review", "send")
    async with app.client(settings) as sagas:
        k = sagas.keys
        await sagas.start("l-1", "u1", input={"text": "hello"})
        await sagas.start("l-2", "u1", input={"text": "URGENT"})

        async def settled() -> bool:
            return await states(redis, k, ["l-1", "l-2"]) == ["completed", "waiting"]

        await wait_until(settled, within=60, what="l-1 sent, l-2 at the gate", every=0.05)
        view = await sagas.get("l-2")
        assert (view.step, view.wait_review) == ("review", True)
        assert await sagas.accept_review("l-2", actor="ann") == 1

        async def sent() -> bool:
            return await states(redis, k, ["l-2"]) == ["completed"]

        await wait_until(sent, within=60, what="l-2 sent after its review", every=0.05)
        out = msgspec.json.decode((await sagas.get("l-2")).outputs["send"])
        assert out == {"text": "URGENT"}
        assert not (await sagas.get("l-2")).review  # accepted, and not flagged again
        _, events = await saga_and_history(redis, k, "l-2")
        kinds = [e.event for e in events]
        assert kinds.index(EventType.REVIEWED) < kinds.index(EventType.GATE_PASSED)
        _, events = await saga_and_history(redis, k, "l-1")
        assert EventType.GATE_PASSED in [e.event for e in events]


class Note(msgspec.Struct):
    text: str


def test_what_a_review_gate_refuses() -> None:
    app = saga.App("bad")
    with pytest.raises(saga.AppError, match="must be one of fail, compensate, continue"):
        app.review_gate("review", timeout=5, on_timeout="default")
    with pytest.raises(saga.AppError, match="needs a timeout"):
        app.review_gate("review", on_timeout="continue")
    first = saga.App("first")
    first.review_gate("review")

    @first.step(after="review")
    async def send(ctx: saga.StepContext, x: Note) -> Note:  # pragma: no cover
        return x

    with pytest.raises(saga.AppError, match="review gate 'review' cannot be the first step"):
        first.build()
