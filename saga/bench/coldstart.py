"""``saga bench --scenario coldstart``: how long a freshly started ``saga worker`` takes
to report ready, and then to commit the first step of a saga that was waiting for it,
the way KEDA starts a pod for a step scaled to zero.

Two saga types, one step each: ``offline`` returns at once; ``llm`` makes a litellm call
(``mock_response``: litellm's import and call path, no network) and declares
``warm=("litellm",)``, so its worker imports litellm before it reports ready. Each run
starts a saga, then the worker process, and reads three times: spawn, the first
``/readyz`` 200 (polled every 10 ms), and the commit (the saga's ``updated``, the
server's clock, which on one host is the same clock).
"""

from __future__ import annotations

import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import msgspec

from saga.api.app import App
from saga.api.pipeline import Pipeline
from saga.state.keys import Keys
from saga.state.replies import num, text

KINDS = ("offline", "llm")


class Start(msgspec.Struct, frozen=True):
    document: str = ""


class Done(msgspec.Struct, frozen=True):
    answer: str = ""


def offline() -> Pipeline:
    app = App("cold_offline")

    @app.step(name="only", calls_models=False)
    async def only(ctx: Any, inp: Start) -> Done:
        return Done()

    return app.build()


def llm() -> Pipeline:
    app = App("cold_llm")

    @app.step(name="only", warm=("litellm",))
    async def only(ctx: Any, inp: Start) -> Done:
        import litellm  # imported before ready: warm=

        reply = await litellm.acompletion(
            model="openai/cold-start", messages=[{"role": "user", "content": "hi"}],
            mock_response="ok",
        )  # fmt: skip
        return Done(answer=str(reply.choices[0].message.content))

    return app.build()


class ColdRun(msgspec.Struct, frozen=True, kw_only=True):
    kind: str
    ready_s: float
    """Process spawn to the first /readyz 200."""
    first_commit_s: float
    """/readyz 200 to the first commit (never below -0.01 s, the poll's period: a worker
    takes no work before it is ready)."""
    total_s: float


class ColdReport(msgspec.Struct, frozen=True, kw_only=True):
    runs: list[ColdRun]
    medians: dict[str, ColdRun]
    command: str


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _ready(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=1) as r:
            return int(r.status) == 200
    except OSError:
        return False


async def _one(client: Any, url: str, kind: str) -> ColdRun:
    from saga.api.client import SagaClient
    from saga.bench.phases import cleanup
    from saga.config.settings import Settings

    made = offline() if kind == "offline" else llm()
    prefix = f"bench-cold-{uuid.uuid4().hex[:8]}"
    keys = Keys(prefix=prefix, saga_type=made.name)
    sagas = SagaClient(client, keys, made, Settings())
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SAGA_")}
    env.update(REDIS_URL=url, SAGA_KEY_PREFIX=prefix, SAGA_LOG_LEVEL="warning",
               SAGA_HEALTH_PORT=str(port), LITELLM_LOCAL_MODEL_COST_MAP="True",
               SAGA_PIPELINE=f"saga.bench.coldstart:{kind}")  # fmt: skip
    log = Path(tempfile.mkdtemp(prefix="saga-bench-cold-")) / "worker.log"
    try:
        await sagas.start("cold-1", "u1")
        with log.open("wb") as out:
            spawned = time.time()
            proc = subprocess.Popen(  # noqa: ASYNC220 - returns at once
                [sys.executable, "-m", "saga.cli.main", "worker", "only"],
                env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=out,
            )  # fmt: skip
        try:
            with anyio.fail_after(120):
                while not await anyio.to_thread.run_sync(_ready, port):
                    if proc.poll() is not None:
                        raise RuntimeError(f"the worker exited; see {log}")
                    await anyio.sleep(0.01)
                ready = time.time()
                while True:
                    state, updated = await client.hmget(keys.saga("cold-1"), "state", "updated")
                    if state is not None and text(state) == "completed":
                        break
                    await anyio.sleep(0.01)
        finally:
            proc.terminate()
            proc.wait(30)
        commit = num(updated) / 1000
        return ColdRun(kind=kind, ready_s=round(ready - spawned, 3),
                       first_commit_s=round(commit - ready, 3),
                       total_s=round(commit - spawned, 3))  # fmt: skip
    finally:
        await cleanup(client, f"{prefix}:*")


async def run_coldstart(
    url: str, runs: int, command: str, progress: Callable[[str], None]
) -> ColdReport:
    """``runs`` interleaved runs of each kind on one server."""
    from saga.state.connection import connect

    client = connect(url)
    done: list[ColdRun] = []
    try:
        for _ in range(runs):
            for kind in KINDS:
                done.append(await _one(client, url, kind))
                progress(str(done[-1]))
    finally:
        await client.aclose()
    medians = {}
    for kind in KINDS:
        mine = [r for r in done if r.kind == kind]
        medians[kind] = ColdRun(
            kind=kind,
            ready_s=round(statistics.median(r.ready_s for r in mine), 3),
            first_commit_s=round(statistics.median(r.first_commit_s for r in mine), 3),
            total_s=round(statistics.median(r.total_s for r in mine), 3),
        )
    return ColdReport(runs=done, medians=medians, command=command)


def render(report: ColdReport) -> str:
    lines = [
        "coldstart: a saga waits; a `saga worker` starts; medians of "
        f"{len(report.runs) // len(KINDS)} interleaved runs",
        "",
        f"{'step':<10}{'spawn→ready':>14}{'ready→commit':>15}{'spawn→commit':>15}",
    ]
    for kind, r in report.medians.items():
        lines.append(f"{kind:<10}{r.ready_s:>13.3f}s{r.first_commit_s:>14.3f}s{r.total_s:>14.3f}s")
    lines += ["", f"command: {report.command}"]
    return "\n".join(lines)
