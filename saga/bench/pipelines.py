"""Pipelines for bench worker processes, named through ``SAGA_PIPELINE``.

``noop``: router → parser → grouper, each step returning a tiny output at once,
so every figure measures the engine (claim, commit, history, logging), not a step.
``stuck``: the same names, but the router never finishes (recovery measurement).
"""

from __future__ import annotations

from typing import Any

import anyio
import msgspec

from saga.pipeline import Pipeline, StepSpec

STEP_NAMES = ("router", "parser", "grouper")


class Done(msgspec.Struct, frozen=True):
    step: str


def _noop(name: str) -> Any:
    out = Done(name)

    async def step(ctx: Any, inp: Any) -> Done:
        return out

    step.__name__ = f"noop_{name}"
    return step


async def _hang(ctx: Any, inp: Any) -> Done:
    await anyio.sleep(3600)
    return Done("router")


def noop() -> Pipeline:
    return Pipeline(
        tuple(StepSpec(name=n, fn=_noop(n), input_type=dict, output_type=Done) for n in STEP_NAMES)
    )


def stuck() -> Pipeline:
    """The router hangs (until its worker is killed); the other steps are no-ops."""
    base = noop()
    return base.with_overrides(
        lambda s: (
            StepSpec(name=s.name, fn=_hang, input_type=dict, output_type=Done, lease_s=s.lease_s)
            if s.name == "router"
            else s
        )
    )
