"""Round trips each transition costs from the client side, measured, not assumed.

A round trip is one write of a request to the socket (one command, or one whole
pipeline), counted by a connection subclass. Alongside, INFO commandstats deltas say
how many EVALSHA calls the server ran and how many commands in all (commands a
script calls count there too: that is server work, not round trips).
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import msgspec
import pytest

from saga.state import operator
from saga.state.connection import connect
from saga.state.keys import Keys
from saga.state.machine import StateMachine
from saga.state.model import FailAction
from saga.state.reads import get_saga_and_history
from saga.state.recovery import recover_idle
from saga.state.requests import CommitRequest, FailRequest
from saga.state.scripts import ensure_loaded
from saga.state.streams import ensure_groups
from tests.state.helpers import STEPS, read_ready

pytestmark = pytest.mark.anyio


class Cost(msgspec.Struct, frozen=True):
    round_trips: int
    evalsha: int
    server_commands: int


class Meter:
    """Counts socket writes of one client and reads the server's command stats."""

    def __init__(self, url: str) -> None:
        self.sends = 0
        self.client = connect(url, health_check_interval=0)
        pool = self.client.connection_pool
        meter = self

        class Counting(pool.connection_class):  # type: ignore[name-defined,misc]
            async def send_packed_command(self, command: Any, check_health: bool = True) -> None:
                meter.sends += 1
                await super().send_packed_command(command, check_health)

        pool.connection_class = Counting

    async def _stats(self) -> dict[str, int]:
        info = await self.client.info("commandstats")
        return {k: int(v["calls"]) for k, v in info.items()}

    async def cost(self, call: Callable[[], Awaitable[Any]]) -> Cost:
        s0 = await self._stats()
        n0 = self.sends
        await call()
        n1 = self.sends
        s1 = await self._stats()
        delta = {k: s1.get(k, 0) - s0.get(k, 0) for k in s1}
        delta["cmdstat_info"] -= 1  # our own INFO after the call
        return Cost(n1 - n0, delta.get("cmdstat_evalsha", 0), sum(delta.values()))


@pytest.fixture
async def meter(redis_url: str, keys: Keys) -> AsyncIterator[Meter]:
    m = Meter(redis_url)
    await ensure_loaded(m.client)  # scripts cached: no NOSCRIPT round trip later
    await ensure_groups(m.client, keys, STEPS)
    yield m
    await m.client.aclose()


async def test_round_trips_of_one_full_saga(meter: Meter, keys: Keys) -> None:
    """start 1; per step: read 1 + claim 1 + commit 1 (+ heartbeat 1); operator calls 2."""
    sm = StateMachine(meter.client, keys)
    costs: dict[str, Cost] = {}
    costs["start"] = await meter.cost(lambda: sm.start("r1", "u1", "router"))
    prev = None
    for step in STEPS:
        box: dict[str, Any] = {}

        async def read(step: str = step, box: dict[str, Any] = box) -> None:
            box["entries"] = await read_ready(meter.client, keys, step, "w-a")

        async def claim(step: str = step, box: dict[str, Any] = box) -> None:
            [out] = await sm.claim(
                step, 0, box["entries"], worker="w-a", lease_ms=60_000, max_lease_expiries=3
            )
            box["claim"] = out.claim

        costs[f"{step}: XREADGROUP"] = await meter.cost(read)
        costs[f"{step}: claim"] = await meter.cost(claim)
        c = box["claim"]
        costs[f"{step}: heartbeat"] = await meter.cost(
            functools.partial(sm.heartbeat, c, worker="w-a", lease_ms=60_000)
        )
        nxt = {"router": "parser", "parser": "grouper", "grouper": ""}[step]
        req = CommitRequest(output=b"{}", next_step=nxt)
        costs[f"{step}: commit"] = await meter.cost(functools.partial(sm.commit, c, req))
        prev = step
    assert prev == "grouper"
    costs["show (saga + history)"] = await meter.cost(
        lambda: get_saga_and_history(meter.client, keys, "r1")
    )
    costs["retry (operator)"] = await meter.cost(
        lambda: operator.retry(sm, "r1", "grouper", "parser")
    )
    costs["cancel (operator)"] = await meter.cost(lambda: operator.cancel(sm, "r1"))

    expected = {"start": (1, 1), "show (saga + history)": (1, 0)}
    for step in STEPS:
        expected |= {
            f"{step}: XREADGROUP": (1, 0),
            f"{step}: claim": (1, 1),
            f"{step}: heartbeat": (1, 1),
            f"{step}: commit": (1, 1),
        }
    expected |= {"retry (operator)": (2, 1), "cancel (operator)": (2, 1)}
    assert {k: (v.round_trips, v.evalsha) for k, v in costs.items()} == expected
    per_step = [costs[f"{s}: claim"].round_trips + costs[f"{s}: commit"].round_trips for s in STEPS]
    assert per_step == [2, 2, 2]  # the design's target: <= 2 per step (after the batched read)
    print("\n" + "\n".join(f"{k:24} {v}" for k, v in costs.items()))


async def test_round_trips_of_batches_fail_and_promote(meter: Meter, keys: Keys) -> None:
    """A claim batch is 1 round trip; N pipelined commits 1; fail 1; promote 2; recover 1."""
    sm = StateMachine(meter.client, keys)
    for i in range(5):
        await sm.start(f"r{i}", "u1", "router")
    entries = await read_ready(meter.client, keys, "router", "w-a")
    box: dict[str, Any] = {}

    async def claim() -> None:
        box["outs"] = await sm.claim(
            "router", 0, entries, worker="w-a", lease_ms=60_000, max_lease_expiries=3
        )

    claim_cost = await meter.cost(claim)
    assert (claim_cost.round_trips, claim_cost.evalsha) == (1, 1)
    claims = [o.claim for o in box["outs"]]
    recover_cost = await meter.cost(
        lambda: recover_idle(sm, "router", 0, worker="w-b", min_idle_ms=3_600_000)
    )
    assert (recover_cost.round_trips, recover_cost.evalsha) == (1, 1)
    items: list[Any] = [(c, CommitRequest(output=b"{}", next_step="parser")) for c in claims[:4]]
    many = await meter.cost(lambda: sm.finish_many(items))
    assert (many.round_trips, many.evalsha) == (1, 1)  # one partition: one commit_steps call
    req = FailRequest(action=FailAction.RETRY, error_class="E", error_message="m")
    fail_cost = await meter.cost(lambda: sm.fail(claims[4], req))
    assert (fail_cost.round_trips, fail_cost.evalsha) == (1, 1)

    async def promote() -> None:
        due = await sm.due_candidates("router", 0, 100)
        await sm.promote("router", 0, [rid for rid, _ in due])

    promote_cost = await meter.cost(promote)
    assert (promote_cost.round_trips, promote_cost.evalsha) == (2, 1)
