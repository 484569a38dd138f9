"""The fault harness: a server of the test's own, real ``saga worker`` processes on the
run-log pipeline, a ready-stream poller, and the end-of-test check that writes one
summary row (``SAGA_FAULT_SUMMARY=path.jsonl``; ``python -m tests.faults.report`` turns
the rows into docs/reliability.md's table)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from collections.abc import AsyncIterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import psutil

from saga.adapters.embedded_redis import EmbeddedServer
from saga.api.client import SagaClient
from saga.config.settings import Settings
from saga.state.connection import connect
from saga.state.keys import Keys
from saga.state.model import SagaState
from tests.executor.support import Worker, spawn_worker, states, wait_until, worker_base_env
from tests.faults import runlog
from tests.faults.invariants import Tally, check_all
from tests.faults.poller import ReadyPoller

PIPELINE = "tests.faults.runlog:pipeline"
TERMINAL = {s.value for s in SagaState if s.terminal}
# Short leases and loops, so a fault's consequences play out in seconds.
FAST = {
    "SAGA_ROUTER_LEASE": "1.5",
    "SAGA_PARSER_LEASE": "1.5",
    "SAGA_GROUPER_LEASE": "1.5",
    "SAGA_RECOVERY_INTERVAL": "0.5",
    "SAGA_DRAIN_SECONDS": "5",
}


@dataclass
class FaultRun:
    """One fault test's world. ``url`` is what workers use (a proxy's, if any);
    ``server.url`` is what the test's own client uses."""

    name: str
    server: EmbeddedServer
    keys: Keys
    tmp: Path
    url: str = ""
    workers: list[Worker] = field(default_factory=list)
    killed: set[int] = field(default_factory=set)
    faults: int = 0
    fault_end: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.url = self.url or self.server.url
        self.runlog = self.tmp / "runlog"
        self.runlog.mkdir(exist_ok=True)
        self.poller = ReadyPoller(self.server.url, self.keys, runlog.STEPS).start()
        self._client: Any = None

    @property
    def redis(self) -> Any:
        if self._client is None:
            self._client = connect(self.server.url, socket_timeout=15)
        return self._client

    async def restart_server(self) -> None:
        """Start the (killed) server again; the test's client reconnects from scratch."""
        self.server.start()
        if self._client is not None:
            with contextlib.suppress(Exception):
                await self._client.aclose()
            self._client = None

    def env(self, **overrides: str) -> dict[str, str]:
        env = worker_base_env(self.url, self.keys, self.tmp / "saga-data")
        env.update(SAGA_PIPELINE=PIPELINE, SAGA_FAULT_RUNLOG=str(self.runlog), **FAST)
        env.update(overrides)
        return {k: v for k, v in env.items() if v != ""}

    def spawn(self, **overrides: str) -> Worker:
        log = self.tmp / f"worker-{len(self.workers)}.log"
        w = spawn_worker(self.env(**overrides), log, runlog.STEPS)
        self.workers.append(w)
        return w

    async def spawn_ready(self, n: int, **overrides: str) -> list[Worker]:
        ws = [self.spawn(**overrides) for _ in range(n)]
        for w in ws:
            await w.wait_ready(within=120)
        return ws

    def kill(self, w: Worker, sig: int = signal.SIGKILL) -> None:
        self.killed.add(w.pid)
        w.signal(sig)
        self.faults += 1

    async def start(self, rids: list[str], user: str = "u1") -> None:
        sagas = SagaClient(self.redis, self.keys, runlog.pipeline(), Settings())
        for rid in rids:
            await sagas.start(rid, user)

    async def wait_running(self, rids: list[str], n: int = 1, within: float = 60) -> float:
        """Until ``n`` of ``rids`` are running (a step claimed): a fault then lands mid-step."""

        async def running() -> bool:
            return sum(s == "running" for s in await states(self.redis, self.keys, rids)) >= n

        return await wait_until(running, within=within, what=f"{n} saga(s) running", every=0.02)

    async def wait_terminal(self, rids: list[str], within: float = 120) -> float:
        """Seconds until every saga is terminal; fails with the stragglers at the deadline."""

        async def done() -> bool:
            for w in self.workers:  # a crashed worker fails the test now, not at the deadline
                if w.pid not in self.killed and not w.alive() and w.proc.returncode != 0:
                    raise AssertionError(f"worker {w.pid} died ({w.proc.returncode}):\n{w.tail()}")
            return set(await states(self.redis, self.keys, rids)) <= TERMINAL

        def stragglers() -> str:
            return "\n".join(w.tail(30) for w in self.workers)

        return await wait_until(
            done, within=within, what="every saga to end", every=0.1, on_timeout=stragglers
        )

    def cpu_seconds(self, workers: list[Worker]) -> float:
        total = 0.0
        for w in workers:
            with contextlib.suppress(psutil.NoSuchProcess):
                t = psutil.Process(w.pid).cpu_times()
                total += t.user + t.system
        return total

    async def finish(
        self,
        rids: list[str],
        *,
        want: dict[str, SagaState] | None = None,
        within: float = 120,
        lossy_since: float | None = None,
    ) -> Tally:
        """Wait for every saga to end, check every invariant, report the summary row."""
        end = self.fault_end or time.monotonic()
        try:
            await self.wait_terminal(rids, within)
        except AssertionError:
            # Still write the row (what was stuck or lost is the figure), then fail.
            self.report(await check_all(self.redis, self.keys, rids, *self._evidence(), want), -1)
            raise
        recovery = time.monotonic() - end
        if lossy_since is not None:
            self.extra["entries_lost_unsynced"] = self.poller.forget_lost(lossy_since)
        tally = await self._settled_check(rids, want)
        self._check_workers(tally)
        self.report(tally, recovery)
        assert not tally.problems, "\n".join(tally.problems[:30])
        return tally

    def _evidence(self) -> tuple[runlog.RunLog, Any]:
        return runlog.RunLog.read(self.runlog), self.poller.enqueues()

    async def _settled_check(self, rids: list[str], want: dict[str, SagaState] | None) -> Tally:
        """The checks, repeated for a few seconds while only stream lag remains (a stale
        entry is acknowledged when a worker next reads it)."""
        box: list[Tally] = []

        async def clean() -> bool:
            t = await check_all(
                self.redis,
                self.keys,
                rids,
                runlog.RunLog.read(self.runlog),
                self.poller.enqueues(),
                want,
            )
            box[:] = [t]
            return not t.problems

        with contextlib.suppress(AssertionError):
            await wait_until(clean, within=15, what="invariants", every=0.5)
        return box[0]

    def _check_workers(self, t: Tally) -> None:
        """No worker died of an unhandled exception; none logged a crash."""
        for w in self.workers:
            if w.pid not in self.killed and not w.alive() and w.proc.returncode != 0:
                t.problem(f"worker {w.pid} exited with {w.proc.returncode}:\n{w.tail(20)}")
            log = w.log.read_text(errors="replace")
            if "Traceback" in log or '"attempt_crashed"' in log:
                t.problem(f"worker {w.pid} logged a crash:\n{w.tail(40)}")

    def report(self, t: Tally, recovery_s: float) -> None:
        row = {
            "fault": self.name,
            **{k: v for k, v in asdict(t).items() if k != "problems"},
            "faults": self.faults,
            "recovery_s": round(recovery_s, 2),
            **self.extra,
        }
        print("\nfault-summary " + json.dumps(row))
        path = os.environ.get("SAGA_FAULT_SUMMARY")
        if path:
            with open(path, "a", encoding="utf-8") as f:
                f.write(json.dumps(row) + "\n")

    async def aclose(self) -> None:
        for w in self.workers:
            w.kill()
        self.poller.stop()
        if self._client is not None:
            await self._client.aclose()


def read_metrics(port: int) -> str:
    """A worker's /metrics page (blocking: call it in a thread)."""
    import urllib.request

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        return str(r.read().decode())


@contextlib.asynccontextmanager
async def fault_run(
    name: str, tmp: Path, *, appendfsync: str = "everysec", **server: Any
) -> AsyncIterator[FaultRun]:
    from tests.executor.support import free_port

    srv = EmbeddedServer(
        data_dir=tmp / "redis", port=free_port(), tied=True, appendfsync=appendfsync, **server
    )
    srv.start()
    run = FaultRun(name, srv, Keys(prefix="f", partitions=1), tmp)
    try:
        yield run
    finally:
        await run.aclose()
        srv.stop(signal.SIGKILL)
