"""Helpers of the controller tests: `saga worker` and `saga controller` processes, and
the queue numbers KEDA would read."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

from saga.state.keys import GROUP, Keys
from tests.executor import pipelines
from tests.executor.support import REPO, Worker, free_port, spawn_worker, worker_env


class Procs:
    """The processes a test started; each has its own log file and health port."""

    def __init__(self, tmp_path: Path) -> None:
        self.dir = tmp_path
        self.started: list[Worker] = []

    def worker(self, env: dict[str, str], *steps: str, **overrides: str) -> Worker:
        log = self.dir / f"worker-{len(self.started)}.log"
        w = spawn_worker(worker_env(env, **overrides), log, steps or pipelines.STEPS)
        self.started.append(w)
        return w

    def controller(self, env: dict[str, str], **overrides: str) -> Worker:
        """A `saga controller` process (the Worker handle fits: pid, port, log, signals)."""
        port = free_port()
        full = {**worker_env(env, **overrides), "SAGA_HEALTH_PORT": str(port)}
        log = self.dir / f"controller-{len(self.started)}.log"
        with open(log, "ab") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "saga.cli.main", "controller"],
                cwd=REPO,
                env=full,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=out,
            )
        c = Worker(proc, port, log, ["controller"])
        self.started.append(c)
        return c

    def kill_all(self) -> None:
        for p in self.started:
            p.kill()

    def tails(self) -> str:
        return "\n".join(p.tail(60) for p in self.started)


async def lag(client: Any, keys: Keys, step: str) -> int:
    """The consumer group's lag on the step's stream: KEDA's wake-up signal."""
    groups = await client.xinfo_groups(keys.ready(0, step))
    return int(next(g for g in groups if g["name"] == GROUP.encode())["lag"] or 0)


async def pending_count(client: Any, keys: Keys, step: str) -> int:
    return int((await client.xpending(keys.ready(0, step), GROUP))["pending"])


def metric(text: str, name: str, **labels: str) -> float | None:
    """One sample of a Prometheus text exposition, or None."""
    from prometheus_client.parser import text_string_to_metric_families

    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                return float(s.value)
    return None
