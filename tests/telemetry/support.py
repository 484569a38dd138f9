"""In-process executors over a tiny two-step pipeline, for the telemetry tests."""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

import anyio
import msgspec

from saga.api.client import SagaClient
from saga.api.pipeline import Pipeline, StepSpec
from saga.api.retry import RetryPolicy
from saga.config.settings import Settings
from saga.state import reads
from saga.state.keys import Keys
from saga.state.model import Saga
from saga.worker.executor import Executor
from saga.worker.observer import Observer
from saga.worker.ports import NullPorts, Ports

KEY = "sk-planted-4f9c2e7d1b8a"
PAGE = "Patient Jane Roe DOB 1970-01-01 Hemoglobin A1c 6.1 % H"


class Doc(msgspec.Struct, frozen=True):
    document: str = ""


class Count(msgspec.Struct, frozen=True):
    n: int = 0


async def extract(ctx: Any, inp: Doc) -> Count:
    """Calls the LLM when the attempt has one (never with anything secret in the logs)."""
    if ctx.llm is not None:
        await ctx.llm.complete([{"role": "user", "content": PAGE}], purpose="extract")
    if inp.document == "broken":
        # A library error that echoes the page and a key, as provider errors do.
        raise ValueError(f"cannot parse {PAGE!r} (Authorization: Bearer {KEY})")
    return Count(n=1)


async def count(ctx: Any, inp: Count) -> Count:
    ctx.log.info("counted", n=inp.n + 1)
    return Count(n=inp.n + 1)


def spec(name: str, fn: Any, input_type: type, attempts: int = 2) -> StepSpec:
    return StepSpec(
        name=name,
        fn=fn,
        input_type=input_type,
        output_type=Count,
        retry=RetryPolicy(max_attempts=attempts, base_s=0.01, cap_s=0.05, jitter=0.0),
        # Generous: the first LLM call loads litellm, which takes tens of seconds on a
        # loaded machine; an attempt cut off there would show as a second span.
        timeout_s=90.0,
        lease_s=90.0,
        concurrency=4,
    )


PIPELINE = Pipeline((spec("extract", extract, Doc), spec("count", count, Count)))


def settings(keys: Keys) -> Settings:
    return Settings(
        key_prefix=keys.prefix,
        partitions=keys.partitions,
        block_ms=50,
        promote_interval_s=0.05,
        recovery_interval_s=5.0,
        health_port=-1,
        drain_s=2.0,
    )


@contextlib.asynccontextmanager
async def executors(
    redis: Any,
    keys: Keys,
    workers: dict[str, Sequence[str]],
    *,
    ports: Ports | None = None,
    observer: Observer | None = None,
    pipeline: Pipeline = PIPELINE,
) -> AsyncIterator[list[Executor]]:
    """Run one Executor per worker name (serving the given steps) until the block ends."""
    made = [
        Executor(
            client=redis,
            keys=keys,
            settings=settings(keys),
            pipeline=pipeline,
            steps=list(steps),
            ports=ports or NullPorts(),
            worker=name,
            observer=observer,
        )
        for name, steps in workers.items()
    ]
    async with anyio.create_task_group() as tg:
        for ex in made:
            tg.start_soon(ex.run)
        try:
            yield made
        finally:
            for ex in made:
                ex.stop()


def client(redis: Any, keys: Keys, pipeline: Pipeline = PIPELINE) -> SagaClient:
    return SagaClient(redis, keys, pipeline, settings(keys))


async def wait_until(
    redis: Any,
    keys: Keys,
    record_ids: Sequence[str],
    *,
    step: str | None = None,
    within: float = 10.0,
) -> list[Saga]:
    """Wait until every saga is terminal (or, with ``step``, has reached ``step``)."""
    deadline = time.monotonic() + within
    while True:
        sagas = [await reads.get_saga(redis, keys, r) for r in record_ids]
        if all(s.state.terminal or (step is not None and s.step == step) for s in sagas):
            return sagas
        if time.monotonic() > deadline:
            raise AssertionError(f"sagas did not finish: {[(s.state, s.step) for s in sagas]}")
        await anyio.sleep(0.02)
