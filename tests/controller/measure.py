"""What one controller pass costs, on a real server: `python -m tests.controller.measure`.

Not a test (pytest does not collect it). Starts its own server, puts 1,000 due retries
in 4 partitions, times promoting them, requeueing them once delivered to a vanished
worker, an idle promote pass and one refresh of the gauges.
"""

from __future__ import annotations

import asyncio
import logging
import tempfile
import time
from pathlib import Path

import structlog

from saga.adapters.embedded_redis import EmbeddedServer
from saga.config.settings import Settings
from saga.controller import requeue
from saga.controller.controller import Controller
from saga.state.connection import connect
from saga.state.keys import Keys
from saga.state.machine import StateMachine
from saga.state.model import FailAction
from saga.state.requests import FailRequest
from saga.state.streams import ensure_groups
from saga.telemetry.snapshot import QueueSnapshot
from tests.executor.pipelines import pipeline
from tests.state.helpers import read_ready

N, PARTITIONS, STEPS = 1000, 4, ["router", "parser", "grouper"]


async def seed(sm: StateMachine) -> None:
    """N sagas whose router attempt failed with a retry due now."""
    for i in range(N):
        await sm.start(f"r{i}", "u", "router")
    retry = FailRequest(action=FailAction.RETRY, error_class="E", error_message="m", delay_ms=0)
    for p in range(PARTITIONS):
        while got := await read_ready(sm.client, sm.keys, "router", "w", count=100, partition=p):
            for out in await sm.claim(
                "router", p, got, worker="w", lease_ms=60_000, max_lease_expiries=5
            ):
                assert out.claim is not None
                await sm.fail(out.claim, retry)


async def until_done(fn: object) -> tuple[int, float]:
    start, total = time.perf_counter(), 0
    while n := await fn():  # type: ignore[operator]
        total += n
    return total, time.perf_counter() - start


async def main() -> None:
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    with tempfile.TemporaryDirectory() as tmp:
        server = EmbeddedServer(data_dir=Path(tmp), tied=True)
        server.start()
        try:
            client = connect(server.url)
            keys = Keys("m", PARTITIONS)
            sm = StateMachine(client, keys)
            await ensure_groups(client, keys, STEPS)
            await seed(sm)
            settings = Settings(partitions=PARTITIONS, key_prefix="m")
            ctl = Controller(client=client, keys=keys, settings=settings,
                             specs=pipeline().steps, name="measure")  # fmt: skip
            await ctl.upkeep.sync_clock()
            n, s = await until_done(ctl.upkeep.promote_once)
            print(f"promoted {n} due retries in {s:.3f} s ({n / s:,.0f}/s)")
            start = time.perf_counter()
            await ctl.upkeep.promote_once()
            print(f"promote pass with nothing due: {1000 * (time.perf_counter() - start):.1f} ms")
            for p in range(PARTITIONS):  # delivered to a worker that then vanishes
                while await read_ready(client, keys, "router", "gone", count=100, partition=p):
                    pass
            requeue.min_idle_ms = lambda spec, interval: 0  # idle at once, for the measure
            n, s = await until_done(ctl.requeuer.once)
            print(f"requeued {n} idle entries in {s:.3f} s ({n / s:,.0f}/s)")
            snapshot, start = QueueSnapshot(), time.perf_counter()
            for _ in range(20):
                await snapshot.refresh(client, keys, STEPS, ["llm"])
            print(f"gauge refresh: {1000 * (time.perf_counter() - start) / 20:.1f} ms")
            await client.aclose()
        finally:
            server.stop()


if __name__ == "__main__":
    asyncio.run(main())
