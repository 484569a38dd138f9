"""``POST /api/v1/sagas/{id}/signals/{event}`` against a real console and server: the
producer's route (viewers refused, bad input one sentence), and with the waits of the
workflow-shapes work (``SagaClient.signal``) a signal kept for the wait to come, a
resend by signal id seen once, a signal to an ended saga a 409; an event its saga type
never waits for a 422; without them a 501."""

from __future__ import annotations

import time
from typing import Any

import pytest

from saga.console.tokens import Role, add_stored_token
from saga.state import operator
from saga.state.keys import Keys
from saga.state.machine import StateMachine
from saga.state.streams import ensure_groups
from saga.state.types import register_type
from tests.app.shapes_apps import reviews
from tests.cli.inspect_support import start
from tests.console.support import RunningConsole, console_signer

pytestmark = pytest.mark.anyio


@pytest.fixture
async def producer(redis: Any, keys: Keys) -> str:
    now = int(time.time() * 1000)
    signer = console_signer()
    return await add_stored_token(redis, keys, "clinic", Role.PRODUCER, signer=signer, now_ms=now)


async def signal(console: RunningConsole, token: str, path: str, **body: Any) -> Any:
    async with console.client(token) as http:
        return await http.post(f"/api/v1/sagas/{path}", json=body)


async def test_who_may_signal_and_bad_input(
    sm: StateMachine, console: RunningConsole, producer: str, tokens: dict[Role, str]
) -> None:
    """A viewer is refused; a bad event, data or field is a 400 in one sentence."""
    await start(sm, "mr-sig", "u-1")
    res = await signal(console, tokens[Role.VIEWER], "mr-sig/signals/approved")
    assert res.status_code == 403
    cases: list[tuple[str, dict[str, Any], str]] = [
        ("mr-sig/signals/Not-An-Event", {}, "event 'Not-An-Event' must be"),
        ("mr-sig/signals/approved", {"data": [1]}, "data must be a JSON object"),
        ("mr-sig/signals/approved", {"colour": "red"}, "unknown field 'colour'"),
        ("mr-sig/signals/approved", {"signal_id": "a b"}, "signal id 'a b'"),
    ]
    for path, body, says in cases:
        res = await signal(console, producer, path, **body)
        assert res.status_code == 400, (path, res.text)
        assert says in res.json()["error"], res.json()


async def test_a_signal_is_kept_resent_safely_and_refused_once_ended(
    sm: StateMachine, console: RunningConsole, producer: str, redis: Any, keys: Keys
) -> None:
    """Sent before the saga waits, a signal is kept; the same signal id again is seen,
    nothing more; an ended saga has no wait left (409); an unknown record is a 404; an
    event the saga type never waits for is a 422 in one sentence, nothing sent."""
    info = reviews.pipeline().info()
    await register_type(redis, keys, info)
    rk = keys.of_type(info.name)
    typed = StateMachine(redis, rk)
    await ensure_groups(redis, rk, info.steps)
    done = await typed.start("mr-done", "u-1", "draft")
    await operator.cancel(typed, "mr-done")
    assert done.created
    await typed.start("mr-sig", "u-1", "draft")
    q = "?type=reviews"
    first = await signal(console, producer, f"mr-sig/signals/approved{q}",
                         data={"by": "dr-who"}, signal_id="s-1")  # fmt: skip
    assert first.status_code == 200, first.text
    assert (first.json()["outcome"], first.json()["signal_id"]) == ("kept", "s-1")
    again = await signal(console, producer, f"mr-sig/signals/approved{q}", signal_id="s-1")
    assert again.status_code == 200 and again.json()["outcome"] == "seen"
    ended = await signal(console, producer, f"mr-done/signals/approved{q}")
    assert ended.status_code == 409, ended.text
    missing = await signal(console, producer, f"mr-none/signals/approved{q}")
    assert missing.status_code == 404, missing.text
    before = await redis.hgetall(rk.saga("mr-sig"))
    for path in (f"mr-sig/signals/aproved{q}", "mr-sig/signals/approved"):
        wrong = await signal(console, producer, path)
        assert wrong.status_code == 422, wrong.text
        assert "never waits for event" in wrong.json()["error"], wrong.json()
    assert await redis.hgetall(rk.saga("mr-sig")) == before
