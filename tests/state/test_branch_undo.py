"""Compensation of a saga with branches undoes its committed lanes in reverse order of
completion (includes/undo_plan.lua reads each lane's 'ct:<step>'), whatever their order
in the pipeline: x forks into a and b, both commit, then the join j fails for good."""

from __future__ import annotations

from typing import Any

import pytest

from saga.state.codes import RC
from saga.state.machine import StateMachine
from saga.state.model import FailAction
from saga.state.replies import text
from saga.state.requests import CommitRequest, FailRequest
from saga.state.streams import ensure_groups
from tests.executor.support import wait_until
from tests.state.helpers import claim_next

pytestmark = pytest.mark.anyio
ROUTE = {"x": "&+a +b", "a": "|=j=b", "b": "|=j=a"}


async def _next_ms(redis: Any, after: int) -> None:
    """Wait until the server's clock is past ``after`` (ms): two commits then differ."""

    async def later() -> bool:
        sec, usec = await redis.time()
        return sec * 1000 + usec // 1000 > after

    await wait_until(later, within=5, what="the server clock to move on", every=0.001)


@pytest.mark.parametrize(("first", "second"), [("a", "b"), ("b", "a")])
async def test_lanes_are_undone_latest_committed_first(
    sm: StateMachine, redis: Any, first: str, second: str
) -> None:
    """The plan is (second, first) for either commit order, and the first undo enqueued
    is the second lane's."""
    await ensure_groups(redis, sm.keys, ("x", "a", "b", "j", "undo:a", "undo:b"))
    await sm.start("r1", "u1", "x")
    x = await claim_next(sm, "x", "w1")
    assert (await sm.commit(x, CommitRequest(output=b"{}", next_step=ROUTE["x"]))).code == RC.OK
    lanes = {s: await claim_next(sm, s, "w1", prev_step="|x") for s in ("a", "b")}
    for step in (first, second):
        out = await sm.commit(lanes[step], CommitRequest(output=b"{}", next_step=ROUTE[step]))
        assert out.code == RC.OK
        ct = int(text(await redis.hget(sm.keys.saga("r1"), f"ct:{step}")))
        await _next_ms(redis, ct)
    j = await claim_next(sm, "j", "w1", prev_step="a")
    fail = FailRequest(action=FailAction.DEAD, error_class="Boom", error_message="boom",
                       undo=("b", "a"))  # fmt: skip
    out = await sm.fail(j, fail)
    assert (out.code, out.state, out.detail) == (RC.OK, "compensating", f"undo:{second}")
    got = await redis.hmget(sm.keys.saga("r1"), ["undo", "step"])
    assert [text(v) for v in got] == [f"{second},{first}", f"undo:{second}"]
