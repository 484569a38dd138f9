"""The rig of the App fault tests (tests/app/test_*_faults.py): an embedded server with
fsync always (behind a reply-dropping proxy when asked), one App's workers with short
leases, the kill -9 rounds with one Redis SIGKILL and restart among them, and a wait for
every saga to complete. Each test keeps its own load and invariants."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from types import TracebackType
from typing import Any

import anyio

from saga.adapters.embedded_redis import EmbeddedServer
from saga.config.settings import Settings, load_settings
from saga.state.connection import connect
from saga.state.keys import Keys
from tests.executor.support import (
    Worker,
    free_port,
    spawn_worker,
    states,
    wait_until,
    worker_base_env,
)
from tests.faults.proxy import Proxy


class FaultFleet:
    """``with FaultFleet(...) as fleet:`` starts the server (and proxy); leaving it kills
    every worker by pid and SIGKILLs the server."""

    def __init__(
        self,
        tmp_path: Path,
        *,
        prefix: str,
        app: str,
        steps: tuple[str, ...],
        proxy_seed: int | None = None,
        **env: str,
    ) -> None:
        self.tmp, self.steps, self.seed = tmp_path, steps, proxy_seed
        self.srv = EmbeddedServer(data_dir=tmp_path / "redis", port=free_port(), tied=True,
                                  appendfsync="always")  # fmt: skip
        self.keys = Keys(prefix=prefix, partitions=1)
        leases = {f"SAGA_{s.upper()}_LEASE": "1.5" for s in steps}
        self.extra = {"SAGA_PIPELINE": app, **leases, "SAGA_RECOVERY_INTERVAL": "0.5",
                      "SAGA_DRAIN_SECONDS": "5", **env}  # fmt: skip
        self.proxy: Proxy | None = None
        self.workers: list[Worker] = []
        self.env: dict[str, str] = {}

    def __enter__(self) -> FaultFleet:
        self.srv.start()
        url = self.srv.url
        if self.seed is not None:  # the workers talk through it; the test's client does not
            self.proxy = Proxy(target_port=self.srv.port, seed=self.seed).start()
            url = f"redis://127.0.0.1:{self.proxy.port}/0"
        self.env = {**worker_base_env(url, self.keys, self.tmp / "data"), **self.extra}
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        for w in self.workers:
            w.kill()
        if self.proxy is not None:
            self.proxy.stop()
        self.srv.stop(signal.SIGKILL)

    @property
    def settings(self) -> Settings:
        """A client's settings: straight to the server, never through the proxy."""
        return load_settings({"REDIS_URL": self.srv.url, "SAGA_KEY_PREFIX": self.keys.prefix})

    def spawn(self) -> Worker:
        w = spawn_worker(self.env, self.tmp / f"worker-{len(self.workers)}.log", self.steps)
        self.workers.append(w)
        return w

    async def kill_rounds(
        self, rounds: int = 4, *, after: Callable[[int], Awaitable[None]] | None = None
    ) -> None:
        """Each round: the newest worker killed -9 and replaced; in the second, Redis is
        SIGKILLed too and restarted from its AOF; then ``after(round)``."""
        for round_ in range(rounds):
            await anyio.sleep(1.0)  # the fault's cadence (a kill a second), not a wait
            self.workers[-1].kill()  # kill -9, mid-whatever
            if round_ == 1:
                self.srv.stop(signal.SIGKILL)
                await anyio.sleep(1.0)  # the outage's length is the fault
                self.srv.start()
            self.spawn()
            if after is not None:
                await after(round_)

    @contextlib.asynccontextmanager
    async def completed(self, keys: Keys, rids: list[str]) -> AsyncIterator[Any]:
        """A client of the server once every saga of ``rids`` has completed (120 s)."""
        client = connect(self.srv.url)
        try:

            async def done() -> bool:
                return await states(client, keys, rids) == ["completed"] * len(rids)

            await wait_until(done, within=120, what="every saga completed", every=0.2)
            yield client
        finally:
            await client.aclose()
