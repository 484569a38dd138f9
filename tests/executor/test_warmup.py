"""A worker imports what its steps need before it reports ready (saga.worker.warmup)."""

from __future__ import annotations

import threading

import anyio
import msgspec
import pytest

from saga.api.app import App
from saga.worker.health import HealthState
from saga.worker.warmup import warm_before_ready, warm_modules, warm_plan

pytestmark = pytest.mark.anyio


class In(msgspec.Struct):
    n: int = 0


class Out(msgspec.Struct):
    n: int = 0


def _specs(calls_models: bool, warm: tuple[str, ...] = ()) -> list:
    app = App("warmup")

    async def only(ctx: object, inp: In) -> Out:
        return Out(inp.n)

    app.step(calls_models=calls_models, warm=warm)(only)
    return list(app.build().steps)


class _ModelPorts:
    def __init__(self) -> None:
        self.warmed = 0

    def warm_up(self) -> tuple[str, ...]:
        self.warmed += 1
        return ("litellm",)


def test_a_step_that_calls_no_model_warms_nothing() -> None:
    """Ports with a model are not warmed for steps declared ``calls_models=False``."""
    assert warm_plan(_specs(False), _ModelPorts()) == []


def test_a_step_that_may_call_a_model_warms_the_ports_and_its_modules() -> None:
    """The ports' model imports come first, then each declared module, once."""
    ports = _ModelPorts()
    specs = _specs(True, ("json", "json", "colorsys"))
    assert warm_modules(specs) == ("json", "colorsys")
    plan = warm_plan(specs, ports)
    assert len(plan) == 3
    plan[0]()
    assert ports.warmed == 1


async def test_readyz_says_warming_until_the_imports_are_done() -> None:
    """/readyz is 503 while the imports run in a thread; the event loop keeps going."""
    health = HealthState()
    health.redis_ok = health.scripts_loaded = health.groups_present = True
    started, release = threading.Event(), threading.Event()
    seen: list[tuple[bool, str]] = []

    def slow_import() -> None:
        started.set()
        assert release.wait(10)

    async def watch() -> None:
        assert await anyio.to_thread.run_sync(started.wait, 10)
        seen.append(health.ready())  # the loop runs while the import blocks its thread
        release.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(watch)
        assert await warm_before_ready([slow_import], "w", health, anyio.Event())
    assert seen and seen[0][0] is False and "warming up" in seen[0][1]
    assert health.ready() == (True, "ok")


async def test_a_stop_while_warming_returns_at_once() -> None:
    """A SIGTERM during a long import stops the worker without waiting for it."""
    health, stopping, release = HealthState(), anyio.Event(), threading.Event()
    stopping.set()
    with anyio.fail_after(5):
        ok = await warm_before_ready([lambda: release.wait(30)], "w", health, stopping)
    release.set()
    assert ok is False


def test_ports_with_no_model_configured_warm_nothing() -> None:
    """With no key, billing or mock response the ports import nothing (no litellm)."""
    from saga.wiring.ports import DefaultPorts

    ports = DefaultPorts.__new__(DefaultPorts)
    ports.llm_enabled = ports.embedding_enabled = False
    assert ports.warm_up() == ()


def test_the_document_router_calls_no_model() -> None:
    """A router-only worker of the document pipeline never imports litellm to be ready."""
    from saga.documents.pipeline import app

    calls = {s.name: s.calls_models for s in app.build().steps}
    assert calls == {"router": False, "parser": True, "grouper": True}
