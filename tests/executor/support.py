"""Helpers of the executor tests: worker processes, deadlines, health probes, history counts.

Workers are real ``saga worker`` processes (``python -m saga.cli.main worker``) logging
JSON lines to a file each, so a failing test can show what every worker did.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any

import anyio

from saga.state.keys import Keys
from saga.state.model import EventType, HistoryEvent, Saga, SagaState
from saga.state.reads import get_saga_and_history
from saga.state.replies import text

REPO = Path(__file__).resolve().parents[2]
TEST_PIPELINE = "tests.executor.pipelines:pipeline"
SOAK = os.environ.get("SAGA_SOAK", "").lower() in ("1", "true", "yes")


# -- deadlines ------------------------------------------------------------------------
async def wait_until(
    predicate: Callable[[], Awaitable[bool]],
    *,
    within: float,
    what: str,
    every: float = 0.02,
    on_timeout: Callable[[], str] | None = None,
) -> float:
    """Poll ``predicate`` until it holds; returns the seconds it took, fails at the deadline."""
    start = time.monotonic()
    while not await predicate():
        if time.monotonic() - start > within:
            extra = f"\n{on_timeout()}" if on_timeout else ""
            raise AssertionError(f"timed out after {within}s waiting for {what}{extra}")
        await anyio.sleep(every)
    return time.monotonic() - start


def free_port() -> int:
    """A port free now, for a process started next to bind. Taken below the kernel's
    ephemeral range (32768+ on Linux): a port from there (bind to 0) can be handed to a
    client socket of another test (xdist runs four at once) before the process binds it."""
    rng = random.SystemRandom()
    for _ in range(200):
        port = rng.randrange(20000, 32000)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port found in 20000-32000")


def http_status(port: int, path: str) -> int:
    """The status code of GET ``path`` on the health port; 0 when nothing answers."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2) as r:
            return int(r.status)
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return 0


async def status(port: int, path: str) -> int:
    return await anyio.to_thread.run_sync(http_status, port, path)


# -- worker processes ---------------------------------------------------------------
class Worker:
    """One ``saga worker`` process with its own health port and log file."""

    def __init__(self, proc: subprocess.Popen[bytes], port: int, log: Path, steps: list[str]):
        self.proc, self.port, self.log, self.steps = proc, port, log, steps
        self.stopped = False

    @property
    def pid(self) -> int:
        return self.proc.pid

    def owns(self, consumer: str) -> bool:
        """Whether a consumer (worker) name is this process's: ``host-<pid>-<start>``."""
        return f"-{self.pid}-" in consumer

    def alive(self) -> bool:
        return self.proc.poll() is None

    def signal(self, sig: int) -> None:
        self.proc.send_signal(sig)
        self.stopped = sig == signal.SIGSTOP or (self.stopped and sig != signal.SIGCONT)

    def kill(self) -> None:
        if self.alive():
            if self.stopped:
                self.signal(signal.SIGCONT)
            self.proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=10)

    async def wait_exit(self, within: float) -> int:
        async def exited() -> bool:
            return not self.alive()

        await wait_until(exited, within=within, what=f"worker {self.pid} to exit", every=0.05)
        code = self.proc.returncode
        assert code is not None
        return code

    async def wait_ready(self, within: float = 120.0) -> float:
        async def ready() -> bool:
            assert self.alive(), f"worker exited with {self.proc.returncode}:\n{self.tail()}"
            return await status(self.port, "/readyz") == 200

        return await wait_until(
            ready, within=within, what=f"worker {self.pid} ready", every=0.05, on_timeout=self.tail
        )

    async def learn_port(self, within: float = 30.0) -> int:
        """The health port the worker logged it listens on (a fallback port, say)."""

        async def listening() -> bool:
            assert self.alive(), f"worker exited with {self.proc.returncode}:\n{self.tail()}"
            found = self.logged("health_listening")
            if found:
                self.port = int(found[0]["port"])
            return bool(found)

        await wait_until(listening, within=within, what="health_listening", on_timeout=self.tail)
        return self.port

    def events(self) -> list[dict[str, Any]]:
        """The JSON log lines written so far (anything else is skipped)."""
        out = []
        for line in self.log.read_text(errors="replace").splitlines():
            with contextlib.suppress(ValueError):
                row = json.loads(line)
                if isinstance(row, dict):
                    out.append(row)
        return out

    def logged(self, event: str) -> list[dict[str, Any]]:
        return [e for e in self.events() if e.get("event") == event]

    def tail(self, lines: int = 40) -> str:
        text_ = self.log.read_text(errors="replace").splitlines()[-lines:]
        return f"--- worker {self.pid} ({' '.join(self.steps)}) ---\n" + "\n".join(text_)


def worker_base_env(redis_url: str, keys: Keys, data_dir: Path) -> dict[str, str]:
    """A worker's environment: this server and key prefix, the test pipeline, fast
    loops, JSON logs; nothing of the caller's SAGA_* settings."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("SAGA_") and k not in ("REDIS_URL", "PYTHONPATH")
    }
    env.update(
        REDIS_URL=redis_url,
        SAGA_KEY_PREFIX=keys.prefix,
        SAGA_PARTITIONS=str(keys.partitions),
        SAGA_DATA_DIR=str(data_dir),
        SAGA_PIPELINE=TEST_PIPELINE,
        SAGA_LOG_FORMAT="json",
        SAGA_LOG_LEVEL="info",
        SAGA_BLOCK_MS="100",
        SAGA_PROMOTE_INTERVAL="0.1",
        SAGA_RECOVERY_INTERVAL="0.5",
        PYTHONPATH=str(REPO),
        LITELLM_LOCAL_MODEL_COST_MAP="True",
        PYTHONUNBUFFERED="1",
    )
    return env


def worker_env(base: dict[str, str], **overrides: str) -> dict[str, str]:
    env = {**base, **overrides}
    return {k: v for k, v in env.items() if v != ""}


def spawn_worker(
    env: dict[str, str], log: Path, steps: Iterable[str], *, own_port: bool = True
) -> Worker:
    """A worker on a free health port of its own; ``own_port=False`` leaves
    SAGA_HEALTH_PORT to ``env`` (``Worker.learn_port`` then reads the bound one)."""
    port = free_port() if own_port else 0
    full = {**env, "SAGA_HEALTH_PORT": str(port)} if own_port else env
    steps = list(steps)
    out = open(log, "ab")  # noqa: SIM115 - the child keeps it; closed when we return
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "saga.cli.main", "worker", *steps],
            cwd=REPO,
            env=full,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
        )
    finally:
        out.close()
    return Worker(proc, port, log, steps)


# -- reading results ---------------------------------------------------------------
async def saga_and_history(client: Any, keys: Keys, rid: str) -> tuple[Saga, list[HistoryEvent]]:
    return await get_saga_and_history(client, keys, rid)


def commits_by_step_epoch(events: list[HistoryEvent]) -> Counter[tuple[str, int]]:
    return Counter((e.step, e.epoch) for e in events if e.event == EventType.COMMITTED)


def assert_one_commit_per_step(
    saga: Saga, events: list[HistoryEvent], steps: Iterable[str]
) -> None:
    """The saga completed and every step was committed exactly once (in its epoch)."""
    commits = commits_by_step_epoch(events)
    expected = Counter((s, saga.epoch) for s in steps)
    assert saga.state == SagaState.COMPLETED, (saga.record_id, saga.state, saga.error_message)
    assert commits == expected, (saga.record_id, commits, [e.event.value for e in events])


async def states(client: Any, keys: Keys, rids: list[str]) -> list[str]:
    """The state of each saga, in one pipeline."""
    pipe = client.pipeline(transaction=False)
    for rid in rids:
        pipe.hget(keys.saga(rid), "state")
    return [text(s) for s in await pipe.execute()]


async def count_committed(client: Any, keys: Keys, step: str) -> int:
    """The partition counter of commits of ``step`` (one partition in these tests)."""
    return int(await client.hget(keys.stats(0), f"committed:{step}") or 0)


async def pending_entries(client: Any, stream: str) -> list[dict[str, Any]]:
    from saga.state.keys import GROUP

    rows = await client.xpending_range(stream, GROUP, "-", "+", 1000)
    return [
        {"id": text(r["message_id"]), "consumer": text(r["consumer"]), "n": r["times_delivered"]}
        for r in rows
    ]


# -- waiting on sagas ---------------------------------------------------------------
async def server_ms(client: Any) -> int:
    secs, micros = await client.time()
    return int(secs) * 1000 + int(micros) // 1000


async def claimed_by(redis: Any, keys: Keys, rid: str, workers: list[Worker]) -> Worker | None:
    """The worker whose router attempt on ``rid`` is running now, if any."""
    state, step, name = await redis.hmget(keys.saga(rid), "state", "step", "worker")
    if text(state) != "running" or text(step) != "router":
        return None
    return next((w for w in workers if w.owns(text(name))), None)


async def wait_claimed(redis: Any, keys: Keys, rid: str, workers: list[Worker]) -> Worker:
    box: list[Worker] = []

    async def claimed() -> bool:
        w = await claimed_by(redis, keys, rid, workers)
        if w is not None:
            box.append(w)
        return bool(box)

    await wait_until(claimed, within=20, what=f"a worker to claim {rid}", every=0.003)
    return box[0]


async def wait_event(
    redis: Any, keys: Keys, rid: str, match: Any, what: str, within: float = 20
) -> HistoryEvent:
    box: list[HistoryEvent] = []

    async def seen() -> bool:
        _, events = await saga_and_history(redis, keys, rid)
        box[:] = [e for e in events if match(e)]
        return bool(box)

    await wait_until(seen, within=within, what=what, every=0.02)
    return box[0]


async def wait_completed(redis: Any, keys: Keys, rid: str, within: float = 20) -> None:
    async def done() -> bool:
        return text(await redis.hget(keys.saga(rid), "state")) == "completed"

    await wait_until(done, within=within, what=f"{rid} completed")


# -- in-process executors -------------------------------------------------------------
@contextlib.asynccontextmanager
async def running(executor: Any) -> Any:
    """Run ``executor.run()`` in a task group for the body, then stop it and wait for the drain."""
    async with anyio.create_task_group() as tg:
        tg.start_soon(executor.run)
        try:
            yield executor
        finally:
            executor.stop()
