"""Pipelines for bench worker processes, named through ``SAGA_PIPELINE``.

``noop``: router → parser → grouper, declared with ``saga.App`` as a user would
(so the bench measures the public API's path), each step returning a tiny output at once,
so every figure measures the engine (claim, commit, history, logging), not a step.
With ``SAGA_BENCH_PAGE_BYTES`` > 0 (``saga bench --page-bytes``) it has the document
pipeline's shape as well: the router stores that much page text, and the parser
loads it and deletes it when it commits.
``stuck``: the same names, but the router never finishes (recovery measurement).
"""

from __future__ import annotations

import os
from typing import Any

import anyio
import msgspec

from saga.api.app import App
from saga.api.pipeline import Pipeline, StepSpec
from saga.state.keys import DEFAULT_TYPE

STEP_NAMES = ("router", "parser", "grouper")
PAGE_BYTES_ENV = "SAGA_BENCH_PAGE_BYTES"
PAGE_CHARS = 2000
"""Text per page: a dense page of a lab report."""


class Start(msgspec.Struct, frozen=True):
    """What ``SagaClient.start`` gives the first step."""

    document: str = ""


class Done(msgspec.Struct, frozen=True):
    step: str


def _noop(name: str) -> Any:
    out = Done(name)

    async def step(ctx: Any, inp: Done) -> Done:
        return out

    step.__name__ = f"noop_{name}"
    return step


_ROUTED = Done("router")


async def _noop_first(ctx: Any, inp: Start) -> Done:
    return _ROUTED


def page_texts(total: int) -> list[str]:
    """``total`` characters of ASCII page text, in pages of at most PAGE_CHARS."""
    line = "Hemoglobin 13.8 g/dL (13.0-17.0); Leukocytes 6.1 10^9/L (4.0-10.0)\n"
    text = (line * (total // len(line) + 1))[:total]
    return [text[i : i + PAGE_CHARS] for i in range(0, total, PAGE_CHARS)]


def _storing(pages: list[str]) -> Any:
    out = Done("router")

    async def step(ctx: Any, inp: Start) -> Done:
        ctx.store_pages(pages)
        return out

    step.__name__ = "noop_router_storing_pages"
    return step


async def _reading(ctx: Any, inp: Done) -> Done:
    if not ctx.pages:  # loaded by the claim: missing pages are an engine defect here
        raise RuntimeError(f"the parser of {ctx.record_id} got no pages")
    return Done("parser")


async def _hang(ctx: Any, inp: Any) -> Done:
    await anyio.sleep(3600)
    return Done("router")


def noop() -> Pipeline:
    app = App(DEFAULT_TYPE)
    page_bytes = int(os.environ.get(PAGE_BYTES_ENV) or 0)
    if page_bytes > 0:
        router = app.step(name="router")(_storing(page_texts(page_bytes)))
        parser = app.step(name="parser", after=router, loads_pages=True, deletes_pages=True)(
            _reading
        )
    else:
        router = app.step(name="router")(_noop_first)
        parser = app.step(name="parser", after=router)(_noop("parser"))
    app.step(name="grouper", after=parser)(_noop("grouper"))
    return app.build()


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
