"""``saga bench --scenario flood``: one user floods the router, another submits a few
sagas once the flood is submitted (behind what of it is still queued); how long the
small user's sagas take, with and without the per-user cap
(``SAGA_USER_MAX_INFLIGHT``), and the total throughput. A run of the flood alone
with and without the cap shows what the cap costs a single user.

The router sleeps ``SAGA_BENCH_STEP_MS`` (a model call's latency, scaled down), the
other steps return at once. Workers are ordinary ``saga worker`` processes on the
bench's own key prefix, which is deleted afterwards. Times are the server's: a saga's
``created`` and its last ``updated`` (when it completed).
"""

from __future__ import annotations

import contextlib
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import msgspec

from saga.api.app import App
from saga.api.pipeline import Pipeline
from saga.state.keys import DEFAULT_TYPE, Keys
from saga.state.replies import num, text

STEP_MS_ENV = "SAGA_BENCH_STEP_MS"


class Start(msgspec.Struct, frozen=True):
    document: str = ""


class Done(msgspec.Struct, frozen=True):
    step: str


def pipeline() -> Pipeline:
    """router (sleeps SAGA_BENCH_STEP_MS) → parser → grouper (no-ops)."""
    app = App(DEFAULT_TYPE)
    pause = int(os.environ.get(STEP_MS_ENV) or 20) / 1000

    @app.step(name="router")
    async def router(ctx: Any, inp: Start) -> Done:
        await anyio.sleep(pause)
        return Done("router")

    @app.step(name="parser", after=router)
    async def parser(ctx: Any, inp: Done) -> Done:
        return Done("parser")

    app.step(name="grouper", after=parser)(_grouper)
    return app.build()


async def _grouper(ctx: Any, inp: Done) -> Done:
    return Done("grouper")


class FloodConfig(msgspec.Struct, frozen=True, kw_only=True):
    flood: int = 5000
    small: int = 10
    workers: int = 1
    concurrency: int = 32
    cap: int = 8
    step_ms: int = 20


class FloodRun(msgspec.Struct, frozen=True, kw_only=True):
    fairness: bool
    cap: int
    small_p50_s: float | None
    """Submission to completion of the small user's sagas (None: the run had none)."""
    small_p99_s: float | None
    small_max_s: float | None
    throughput: float
    """Sagas completed per second, first submission to last completion."""
    wall_s: float


class FloodReport(msgspec.Struct, frozen=True, kw_only=True):
    config: FloodConfig
    runs: list[FloodRun]
    single_user_ratio: float
    """Throughput of the flood alone with the cap / without it."""
    command: str


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def _workers(cfg: FloodConfig, url: str, prefix: str, cap: int) -> Iterator[list[int]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SAGA_")}
    env.update(REDIS_URL=url, SAGA_KEY_PREFIX=prefix, SAGA_PIPELINE="saga.bench.flood:pipeline",
               SAGA_LOG_LEVEL="warning", SAGA_LOG_FORMAT="json", SAGA_USER_MAX_INFLIGHT=str(cap),
               SAGA_ROUTER_CONCURRENCY=str(cfg.concurrency), SAGA_PROMOTE_INTERVAL="0.2",
               **{STEP_MS_ENV: str(cfg.step_ms)})  # fmt: skip
    ports = [_free_port() for _ in range(cfg.workers)]
    logs = Path(tempfile.mkdtemp(prefix="saga-bench-flood-"))
    procs = []
    try:
        for i, port in enumerate(ports):
            with (logs / f"worker-{i}.log").open("wb") as log:
                procs.append(subprocess.Popen(
                    [sys.executable, "-m", "saga.cli.main", "worker", "router", "parser",
                     "grouper"],
                    env={**env, "SAGA_HEALTH_PORT": str(port)},
                    stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                ))  # fmt: skip
        yield ports
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(30)
            if p.poll() is None:
                p.kill()
                p.wait()


async def _ready(ports: list[int], limit_s: float = 120.0) -> None:
    import urllib.request

    def up(port: int) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=1) as r:
                return int(r.status) == 200
        except OSError:
            return False

    with anyio.fail_after(limit_s):
        for port in ports:
            while not await anyio.to_thread.run_sync(up, port):  # noqa: ASYNC110 - a process
                await anyio.sleep(0.2)


async def _submit(sagas: Any, rids: list[str], user: str) -> None:
    for i in range(0, len(rids), 16):  # within the client's connection pool
        async with anyio.create_task_group() as tg:
            for rid in rids[i : i + 16]:
                tg.start_soon(sagas.start, rid, user)


async def _times(client: Any, keys: Keys, rids: list[str]) -> list[tuple[str, int, int]]:
    pipe = client.pipeline(transaction=False)
    for rid in rids:
        pipe.hmget(keys.saga(rid), ["state", "created", "updated"])
    return [(text(s), num(c), num(u)) for s, c, u in await pipe.execute()]


async def _one(
    client: Any, cfg: FloodConfig, url: str, cap: int, small: int, progress: Callable[[str], None]
) -> FloodRun:
    from saga.api.client import SagaClient
    from saga.bench.phases import cleanup
    from saga.config.settings import Settings

    prefix = f"bench-flood-{uuid.uuid4().hex[:8]}"
    keys = Keys(prefix=prefix)
    sagas = SagaClient(client, keys, pipeline(), Settings())
    flood = [f"f{i:06d}" for i in range(cfg.flood)]
    few = [f"s{i:04d}" for i in range(small)]
    try:
        with _workers(cfg, url, prefix, cap) as ports:
            await _ready(ports)
            began = time.monotonic()
            await _submit(sagas, flood, "flood")  # the workers start on it meanwhile
            await _submit(sagas, few, "small")  # ... and find the rest of it queued
            everyone = flood + few
            with anyio.fail_after(600):
                while await _left(client, keys, everyone):  # noqa: ASYNC110 - other processes
                    await anyio.sleep(0.1)
            wall = time.monotonic() - began
        rows = await _times(client, keys, everyone)
        first, last = min(c for _, c, _ in rows), max(u for _, _, u in rows)
        lat = sorted((u - c) / 1000 for _, c, u in (await _times(client, keys, few)))
        run = FloodRun(
            fairness=cap > 0, cap=cap, wall_s=round(wall, 2),
            throughput=round(len(everyone) / max((last - first) / 1000, 1e-3), 1),
            small_p50_s=round(statistics.median(lat), 3) if lat else None,
            small_p99_s=round(_pct(lat, 0.99), 3) if lat else None,
            small_max_s=round(lat[-1], 3) if lat else None,
        )  # fmt: skip
        progress(f"cap {cap}, small {small}: {run}")
        return run
    finally:
        await cleanup(client, f"{prefix}:*")


async def _left(client: Any, keys: Keys, rids: list[str]) -> int:
    return sum(s != "completed" for s, _, _ in await _times(client, keys, rids))


def _pct(sorted_values: list[float], q: float) -> float:
    i = min(len(sorted_values) - 1, max(0, round(q * (len(sorted_values) - 1))))
    return sorted_values[i]


async def run_flood(
    cfg: FloodConfig, url: str, command: str, progress: Callable[[str], None]
) -> FloodReport:
    """Four runs on one server: flood + small user without and with the cap, then the
    flood alone without and with it (what the cap costs one user)."""
    from saga.state.connection import connect

    client = connect(url)
    try:
        runs = [await _one(client, cfg, url, cap, cfg.small, progress) for cap in (0, cfg.cap)]
        alone = [await _one(client, cfg, url, cap, 0, progress) for cap in (0, cfg.cap)]
    finally:
        await client.aclose()
    ratio = alone[1].throughput / alone[0].throughput if alone[0].throughput else 0.0
    return FloodReport(config=cfg, runs=[*runs, *alone], single_user_ratio=round(ratio, 3),
                       command=command)  # fmt: skip


def render(report: FloodReport) -> str:
    c = report.config
    lines = [
        f"flood: {c.flood} sagas of one user, then {c.small} of another; "
        f"router {c.step_ms} ms, {c.workers} worker(s) x {c.concurrency} router slots",
        "",
        f"{'fairness':<22}{'small p50':>11}{'small p99':>11}{'small max':>11}{'sagas/s':>10}",
    ]
    for r in report.runs:
        label = (f"cap {r.cap}" if r.fairness else "off") + (
            "" if r.small_p50_s else ", flood alone"
        )
        cells = [_s(r.small_p50_s), _s(r.small_p99_s), _s(r.small_max_s)]
        lines.append(f"{label:<22}" + "".join(f"{x:>11}" for x in cells) + f"{r.throughput:>10.1f}")
    lines += ["", f"one user alone, cap / no cap throughput: {report.single_user_ratio:.3f}",
              f"command: {report.command}"]  # fmt: skip
    return "\n".join(lines)


def _s(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}s"
