"""``saga bench --cluster``: does throughput grow with primaries?

The same backlog of no-op three-step sagas runs through W ``saga worker`` processes
against four layouts, each on servers started for it from the embedded server's
binary (jemalloc when the machine has it, AOF on, TCP): one server with 1 partition,
one server with 16, a one-primary cluster with 16 (the cluster client's own cost) and a
three-primary cluster with 16. Each reports transitions/s, the workers' round trips and
CPU per transition, and each primary's CPU per transition (INFO cpu): on a machine with
fewer cores than processes the rate is contention-bound, and the per-primary CPU is
what predicts a cluster on real hardware (``docs/benchmarks.md``)."""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import msgspec
import redis

from saga.bench.config import BenchError, Progress
from saga.bench.procs import WorkerSet
from saga.bench.systems import SagaSystem
from saga.state.connection import connect
from saga.state.partitions import guard

STEPS = 3


class Layout(msgspec.Struct, frozen=True):
    name: str
    primaries: int
    """0: one plain server (no cluster mode)."""
    partitions: int
    replicas: int = 0
    """Replicas per primary."""
    durability: str = "local"
    """SAGA_COMMIT_DURABILITY of the workers."""


LAYOUTS = (
    Layout("1 server, 1 partition", 0, 1),
    Layout("1 server, 16 partitions", 0, 16),
    Layout("cluster, 1 primary, 16 partitions", 1, 16),
    Layout("cluster, 3 primaries, 16 partitions", 3, 16),
    Layout("cluster, 3 primaries + 3 replicas, durability local", 3, 16, 1),
    Layout("cluster, 3 primaries + 3 replicas, durability replica", 3, 16, 1, "replica"),
)


class LayoutResult(msgspec.Struct, kw_only=True):
    layout: Layout
    transitions: int
    wall_s: float
    transitions_per_s: float
    round_trips_per_transition: float
    worker_cpu_us_per_transition: float
    server_cpu_us_per_transition: float
    """All primaries together."""
    primary_cpu_us_per_transition: list[float]
    """Each primary's CPU over all transitions (its share of the work)."""
    primary_cpu_us_per_own_transition: list[float]
    """Each primary's CPU per transition of the partitions it serves."""
    primary_busy: list[float]
    """Each primary's CPU seconds per wall second (1.0: one core, saturated)."""


class ClusterReport(msgspec.Struct, kw_only=True):
    cores: int
    workers: int
    concurrency: int
    sagas: int
    results: list[LayoutResult]


class _Servers:
    """The servers of one layout: their addresses, URL and whether it is a cluster."""

    def __init__(self, layout: Layout, data: Path) -> None:
        from saga.adapters.embedded_redis import EmbeddedServer
        from saga.bench.local_cluster import LocalCluster, free_port

        self.cluster = layout.primaries > 0
        self._c = (
            LocalCluster(data, layout.primaries, replicas=layout.replicas) if self.cluster else None
        )
        self._s = None if self.cluster else EmbeddedServer(data, port=free_port([]))

    def __enter__(self) -> _Servers:
        if self._c is not None:
            self._c.start(within_s=60)
        else:
            assert self._s is not None
            self._s.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._c is not None:
            self._c.stop()
        elif self._s is not None:
            self._s.stop()

    @property
    def url(self) -> str:
        return self._c.url if self._c is not None else self._s.url  # type: ignore[union-attr]

    @property
    def ports(self) -> list[int]:
        """The primaries' ports (replicas' CPU is not the primaries' work)."""
        if self._c is not None:
            return self._c.ports[: self._c.primaries]
        return [self._s.port]  # type: ignore[union-attr]


def _cpu_s(port: int) -> float:
    c = redis.Redis(host="127.0.0.1", port=port, socket_timeout=5)
    try:
        info = c.info("cpu")
        return float(info["used_cpu_sys"]) + float(info["used_cpu_user"])
    finally:
        c.close()


async def run_layout(
    layout: Layout, sagas: int, workers: int, concurrency: int, progress: Progress
) -> LayoutResult:
    with contextlib.ExitStack() as stack:
        data = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="saga-cb-")))
        servers = stack.enter_context(_Servers(layout, data / "servers"))
        flags = {"SAGA_LOG_LEVEL": "warning", "REDIS_URL": servers.url,
                 "SAGA_REDIS_CLUSTER": "1" if servers.cluster else "0",
                 "SAGA_COMMIT_DURABILITY": layout.durability}  # fmt: skip
        system = SagaSystem(f"cb{uuid.uuid4().hex[:6]}", layout.partitions, flags)
        client = connect(servers.url, cluster=servers.cluster)
        try:
            if servers.cluster:
                await client.initialize()
            await guard(client, system.keys)
            await system.prepare(client)
            progress(f"{layout.name}: submitting {sagas} sagas")
            await system.submit(client, [(f"r{i}", f"u{i % 100}") for i in range(sagas)])
            shares = _shares(client, system, servers.ports) if servers.cluster else [1.0]
            logs = data / "logs"
            logs.mkdir()
            env = {k: v for k, v in os.environ.items() if not k.startswith("SAGA_")}
            ws = stack.enter_context(WorkerSet([system.worker_argv(servers.url, concurrency,
                str(WorkerSet.stats_path(logs, "w", i))) for i in range(workers)],
                {**env, **system.worker_env()}, logs, "w"))  # fmt: skip
            await ws.start()
            cpu0 = [await anyio.to_thread.run_sync(_cpu_s, p) for p in servers.ports]
            wall0 = time.monotonic()
            ws.go()
            await _wait_done(client, system, sagas, ws)
            wall = time.monotonic() - wall0
            cpu1 = [await anyio.to_thread.run_sync(_cpu_s, p) for p in servers.ports]
            usages = await ws.stop()
        finally:
            await client.aclose()
    n = sagas * STEPS
    cpu = [b - a for a, b in zip(cpu0, cpu1, strict=True)]
    return LayoutResult(
        layout=layout, transitions=n, wall_s=round(wall, 3), transitions_per_s=round(n / wall),
        round_trips_per_transition=round(sum(u.round_trips for u in usages) / n, 3),
        worker_cpu_us_per_transition=round(sum(u.cpu_s for u in usages) / n * 1e6, 1),
        server_cpu_us_per_transition=round(sum(cpu) / n * 1e6, 1),
        primary_cpu_us_per_transition=[round(c / n * 1e6, 1) for c in cpu],
        primary_cpu_us_per_own_transition=[
            round(c / (n * s) * 1e6, 1) if s else 0.0 for c, s in zip(cpu, shares, strict=True)],
        primary_busy=[round(c / wall, 2) for c in cpu],
    )  # fmt: skip


def _shares(client: Any, system: SagaSystem, ports: list[int]) -> list[float]:
    """Each node's share of the partitions, in ``ports`` order."""
    owners = [client.get_node_from_key(system.keys.ready(p, "router")).port
              for p in system.keys.all_partitions()]  # fmt: skip
    return [owners.count(port) / len(owners) for port in ports]


async def _wait_done(client: Any, system: SagaSystem, want: int, ws: WorkerSet) -> None:
    done, last, since = -1, -1, time.monotonic()
    while done < want:
        await anyio.sleep(0.1)
        done, _ = await system.completed(client)
        ws.check()
        if done != last:
            last, since = done, time.monotonic()
        elif time.monotonic() - since > 60:
            raise BenchError(f"{done} of {want} sagas finished and none for 60 s: {ws.tail(0)}")


async def run_cluster_bench(
    sagas: int, workers: int, concurrency: int, progress: Progress, layouts: Iterator[Layout]
) -> ClusterReport:
    results = []
    for layout in layouts:
        results.append(await run_layout(layout, sagas, workers, concurrency, progress))
        r = results[-1]
        progress(f"{layout.name}: {r.transitions_per_s:,.0f} transitions/s")
    return ClusterReport(cores=os.cpu_count() or 1, workers=workers, concurrency=concurrency,
                         sagas=sagas, results=results)  # fmt: skip


def render_cluster(report: ClusterReport) -> str:
    """The report as a Markdown table (docs/benchmarks.md quotes it)."""
    lines = [
        f"{report.sagas} sagas ({report.sagas * STEPS} transitions), {report.workers} worker "
        f"process(es) x concurrency {report.concurrency}, {report.cores} cores shared by "
        "workers and servers",
        "",
        "| layout | transitions/s | round trips / transition | worker CPU µs / transition "
        "| server CPU µs / transition | per primary: CPU µs / own transition | per primary: busy |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in report.results:
        own = ", ".join(f"{c:.0f}" for c in r.primary_cpu_us_per_own_transition)
        busy = ", ".join(f"{b:.2f}" for b in r.primary_busy)
        lines.append(
            f"| {r.layout.name} | {r.transitions_per_s:,.0f} | {r.round_trips_per_transition:.2f} "
            f"| {r.worker_cpu_us_per_transition:.0f} | {r.server_cpu_us_per_transition:.0f} "
            f"| {own} | {busy} |"
        )
    return "\n".join(lines)
