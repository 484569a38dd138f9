"""Graphs beyond one fork and one join run to the end through the real scripts, in any
order of claims and commits: a branch that is itself a chain, a join inside branches, a
step after a fork and its join (a transitive edge), and two last steps. Each shape is
built by ``saga.App`` and driven as workers would drive it (``Pipeline.claim_guess`` for
the claim, ``Pipeline.next_of`` for the commit): every step commits exactly once, each
join takes its parents' outputs, and the saga completes."""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import msgspec
import pytest

import saga
from saga.api.pipeline import Pipeline
from saga.state.codes import RC
from saga.state.machine import StateMachine
from saga.state.requests import CommitRequest
from saga.state.streams import ensure_groups
from tests.state.helpers import history, read_ready

pytestmark = pytest.mark.anyio


class A(msgspec.Struct):
    by: str = ""


SHAPES = {
    "chain in a branch": {"x": [], "a1": ["x"], "a2": ["a1"], "b": ["x"], "j": ["a2", "b"]},
    "join inside branches": {
        "x": [], "a": ["x"], "b": ["x"], "c": ["x"], "d": ["a", "b"], "j": ["d", "c"],
    },
    "transitive edge": {"x": [], "a": ["x"], "j": ["x", "a"]},
    "two last steps": {"x": [], "a": ["x"], "b": ["x"]},
    "fork of three, then a chain": {
        "x": [], "a": ["x"], "b": ["x"], "c": ["x"], "j": ["a", "b", "c"], "k": ["j"],
    },
}  # fmt: skip


def build(shape: dict[str, list[str]]) -> Pipeline:
    app = saga.App("shapes")
    for name, parents in shape.items():
        tp: Any = A
        if len(parents) > 1:
            tp = msgspec.defstruct(f"In_{name}", [(p, A) for p in parents])

        async def fn(ctx: Any, inp: Any) -> A:
            return A()

        fn.__annotations__ = {"ctx": Any, "inp": tp, "return": A}
        after = parents[0] if len(parents) == 1 else parents or None
        app.step(name=name, after=after)(fn)
    return app.build()


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("shape", list(SHAPES))
async def test_a_graph_runs_each_step_once_in_any_order(
    sm: StateMachine, redis: Any, shape: str, seed: int
) -> None:
    """Claims of everything ready, then commits in a shuffled order, until nothing is
    ready: completed, each step once, each join with every parent's output."""
    pipe, rng = build(SHAPES[shape]), random.Random(seed)
    await ensure_groups(redis, sm.keys, pipe.names)
    await sm.start("r1", "u1", pipe.first.name)
    for _ in range(50):
        claims = []
        for step in pipe.names:
            entries = await read_ready(redis, sm.keys, step, "w1", count=10)
            spec = pipe.get(step)
            outs = await sm.claim(step, 0, entries, worker="w1", lease_ms=60_000,
                                  max_lease_expiries=3, prev_step=pipe.claim_guess(step),
                                  extra_fields=tuple(f"out:{p}" for p in spec.joins))  # fmt: skip
            claims += [o.claim for o in outs if o.claim is not None]
        if not claims:
            break
        rng.shuffle(claims)
        for c in claims:
            joins = pipe.get(c.step).joins
            assert all(c.extra[f"out:{p}"] == f'{{"by":"{p}"}}'.encode() for p in joins), c
            out = await sm.commit(c, CommitRequest(output=f'{{"by":"{c.step}"}}'.encode(),
                                                   next_step=pipe.next_of(c.step)))  # fmt: skip
            assert out.code == RC.OK, (c.step, out)
    assert (await redis.hget(sm.keys.saga("r1"), "state")) == b"completed"
    events = await history(redis, sm.keys, "r1")
    commits = Counter(f["s"] for f in events if f.get("e") == "committed")
    assert commits == Counter(pipe.names), commits
