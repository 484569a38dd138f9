"""The bench driver: runs each system the same way on the same server, then reports.

Per system, two phases, each with W fresh worker processes held at a barrier
until every one has imported its code:

1. Backlog (throughput and cost): N sagas are submitted first, then the workers
   are let go at once; the clock runs from the go signal to the last step's last
   commit, read from the system's own timestamps. INFO commandstats, INFO cpu and
   used_memory are read around it; each worker reports its round trips, CPU and
   peak memory when it exits.
2. Paced (latency): sagas are submitted at a fixed rate (default: half of the
   rate the backlog phase reached) to running workers; end-to-end latency and
   step hand-off come from this phase.

Every run uses its own key prefix and deletes its keys at the end.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any

import anyio
import msgspec

from saga.bench import extras
from saga.bench.measure import (
    Timing,
    code_version,
    commandstats,
    delta,
    forks,
    machine,
    now_ms,
    pcts,
    server_cpu_s,
    server_info,
    server_time_ms,
    settle_memory,
    used_memory,
)
from saga.bench.procs import WorkerSet
from saga.bench.report import (
    ColdStart,
    Latency,
    Memory,
    Params,
    Recovery,
    RedisCost,
    Report,
    Retention,
    SystemResult,
    Throughput,
    Workers,
    ratios,
    targets,
)
from saga.bench.systems import (
    STEPS,
    MinimalSystem,
    SagaSystem,
    SeedSystem,
    System,
    memory_of,
)
from saga.settings import Settings
from saga.state.connection import connect

SYSTEMS = ("saga", "seed", "minimal")
USERS = 100
"""Distinct user ids across the bench's sagas (the per-user index is a sorted set each)."""


class BenchConfig(msgspec.Struct, frozen=True, kw_only=True):
    sagas: int = 1000
    workers: int = 1
    concurrency: int = 64
    rate: float | None = None
    """Sagas/s of the paced phase; None: half the backlog rate; 0: no paced phase."""
    rate_seconds: float = 10.0
    """The paced phase submits rate x this many sagas (at most --sagas)."""
    tracing: bool = False
    log_level: str = "info"
    only: tuple[str, ...] = SYSTEMS
    cli_runs: int = 10
    recovery: bool = True
    retention_check: bool = True
    """Two short waves with a retention of seconds: is memory bounded after expiry?"""
    private_server: bool = False
    keep_logs: bool = False
    stall_s: float = 60.0
    """Give up when no saga finishes for this long."""


class BenchError(RuntimeError):
    """The bench could not complete a phase."""


Progress = Callable[[str], None]


class _Phase(msgspec.Struct, kw_only=True):
    timings: list[Timing]
    t_go_ms: float
    wall_s: float
    usages: list[Any]
    commands: dict[str, int]
    server_cpu_s: float


async def _cleanup(client: Any, pattern: str) -> int:
    removed = 0
    async for batch in _scan(client, pattern):
        removed += int(await client.unlink(*batch))
    return removed


async def _scan(client: Any, pattern: str) -> AsyncIterator[list[Any]]:
    cursor: Any = 0
    while True:
        cursor, found = await client.scan(cursor, match=pattern, count=1000)
        if found:
            yield list(found)
        if int(cursor) == 0:
            return


async def _wait_done(
    client: Any, system: System, want: int, workers: WorkerSet, stall_s: float, polls: Counter[str]
) -> None:
    done, last, last_change = -1, -1, time.monotonic()
    while done < want:
        await anyio.sleep(0.05)
        done, cost = await system.completed(client)
        polls.update(cost)
        workers.check()
        if done != last:
            last, last_change = done, time.monotonic()
        elif time.monotonic() - last_change > stall_s:
            raise BenchError(
                f"{system.name}: {done} of {want} sagas finished and none for {stall_s:.0f} s; "
                f"worker log: {workers.tail(0)}"
            )


def _workers(system: System, cfg: BenchConfig, url: str, env: dict[str, str], log_dir: Path,
             label: str) -> WorkerSet:  # fmt: skip
    argvs = [
        system.worker_argv(url, cfg.concurrency, str(WorkerSet.stats_path(log_dir, label, i)))
        for i in range(cfg.workers)
    ]
    return WorkerSet(argvs, {**env, **system.worker_env()}, log_dir, label)


async def _backlog(
    client: Any,
    system: System,
    cfg: BenchConfig,
    url: str,
    env: dict[str, str],
    log_dir: Path,
    rids: Sequence[str],
) -> _Phase:
    with _workers(system, cfg, url, env, log_dir, f"{system.name}-backlog") as ws:
        await ws.start()
        stats0 = await commandstats(client)
        cpu0 = await server_cpu_s(client)
        own: Counter[str] = Counter({"info": 1})
        if system.clock_is_server():
            t_go = await server_time_ms(client)
            own["time"] += 1
        else:
            t_go = now_ms()
        wall0 = time.monotonic()
        ws.go()
        await _wait_done(client, system, len(rids), ws, cfg.stall_s, own)
        wall = time.monotonic() - wall0
        usages = await ws.stop()
        if len(usages) != cfg.workers:
            raise BenchError(
                f"{system.name}: {len(usages)} of {cfg.workers} workers reported their usage; "
                f"worker log: {ws.tail(0)}"
            )
        stats1 = await commandstats(client)
        cpu1 = await server_cpu_s(client)
    commands = delta(stats1, stats0)
    for name, n in own.items():
        commands[name] = commands.get(name, 0) - n
    timings = await system.timings(client, rids)
    return _Phase(
        timings=timings,
        t_go_ms=t_go,
        wall_s=wall,
        usages=usages,
        commands={k: v for k, v in commands.items() if v > 0},
        server_cpu_s=cpu1 - cpu0,
    )


async def _paced(
    client: Any,
    system: System,
    cfg: BenchConfig,
    url: str,
    env: dict[str, str],
    log_dir: Path,
    rate: float,
    already_done: int,
) -> Latency:
    count = max(1, min(cfg.sagas, int(rate * cfg.rate_seconds)))
    records = [(f"l{i:07d}", f"u{i % USERS:03d}") for i in range(count)]
    with _workers(system, cfg, url, env, log_dir, f"{system.name}-paced") as ws:
        await ws.start()
        ws.go()
        await anyio.sleep(0.5)  # connected, groups checked, blocked in XREADGROUP
        t0 = time.monotonic()
        sent = 0
        while sent < count:
            due = min(count, int((time.monotonic() - t0) * rate) + 1)
            if due > sent:
                await system.submit(client, records[sent:due])
                sent = due
            await anyio.sleep(0.002)
        submit_s = time.monotonic() - t0
        await _wait_done(client, system, already_done + count, ws, cfg.stall_s, Counter())
        await ws.stop()
    timings = await system.timings(client, [r for r, _ in records])
    if len(timings) != count:
        raise BenchError(f"{system.name}: {len(timings)} of {count} paced sagas have timings")
    return Latency(
        target_rate=round(rate, 1),
        achieved_rate=round(count / submit_s, 1) if submit_s > 0 else 0.0,
        sagas=count,
        e2e_ms=pcts(t.e2e_ms for t in timings),
        handoff_ms=pcts(h for t in timings for h in t.handoffs_ms()),
    )


async def run_system(
    client: Any,
    system: System,
    cfg: BenchConfig,
    url: str,
    env: dict[str, str],
    log_dir: Path,
    progress: Progress,
    after: Callable[[System, Sequence[str]], Any] | None = None,
) -> SystemResult:
    n = cfg.sagas
    transitions = n * len(STEPS)
    records = [(f"r{i:07d}", f"u{i % USERS:03d}") for i in range(n)]
    rids = [r for r, _ in records]
    try:
        await system.prepare(client)
        forks0 = await forks(client)
        mem0 = await settle_memory(client)
        progress(f"{system.name}: submitting {n} sagas")
        await system.submit(client, records)
        progress(f"{system.name}: {cfg.workers} worker(s) x concurrency {cfg.concurrency}, backlog")
        phase = await _backlog(client, system, cfg, url, env, log_dir, rids)
        if len(phase.timings) != n:
            raise BenchError(f"{system.name}: {len(phase.timings)} of {n} sagas have timings")
        mem1 = await used_memory(client)
        await system.trim(client)
        mem2 = await used_memory(client)
        sample = await memory_of(client, system.record_keys(rids[n // 2]))
        last = max(t.committed_ms[-1] for t in phase.timings)
        elapsed = max((last - phase.t_go_ms) / 1000, 1e-6)
        throughput = Throughput(
            elapsed_s=round(elapsed, 3),
            sagas_per_s=round(n / elapsed, 1),
            transitions_per_s=round(transitions / elapsed, 1),
            wall_s=round(phase.wall_s, 3),
            e2e_ms=pcts(t.e2e_ms for t in phase.timings),
            handoff_ms=pcts(h for t in phase.timings for h in t.handoffs_ms()),
        )
        progress(
            f"{system.name}: {throughput.transitions_per_s:,.0f} transitions/s "
            f"({throughput.elapsed_s:.2f} s)"
        )
        latency = None
        if cfg.rate != 0:
            rate = cfg.rate or throughput.sagas_per_s / 2
            progress(f"{system.name}: paced phase at {rate:,.0f} sagas/s")
            latency = await _paced(client, system, cfg, url, env, log_dir, rate, n)
        forks1 = await forks(client)
        if after is not None:
            await after(system, rids)
    finally:
        await _cleanup(client, f"{system.prefix}*")
    trips = sum(u.round_trips for u in phase.usages)
    singles: Counter[str] = Counter()
    for u in phase.usages:
        singles.update(u.single_commands)
    breakdown = {k: round(v / transitions, 4) for k, v in sorted(singles.items())}
    breakdown["pipeline"] = round((trips - sum(singles.values())) / transitions, 4)
    total_cmds = sum(phase.commands.values())
    cpu = sum(u.cpu_s for u in phase.usages)
    peaks = [u.peak_rss_bytes for u in phase.usages] or [0]
    return SystemResult(
        name=system.name,
        sagas=n,
        transitions=transitions,
        throughput=throughput,
        latency=latency,
        redis=RedisCost(
            commands_per_transition=round(total_cmds / transitions, 3),
            commands={k: round(v / transitions, 4) for k, v in phase.commands.items()},
            round_trips_per_transition=round(trips / transitions, 3),
            round_trips=breakdown,
            server_cpu_us_per_transition=round(phase.server_cpu_s * 1e6 / transitions, 2),
        ),
        memory=Memory(
            per_saga_bytes=round((mem1 - mem0) / n, 1),
            retained_per_saga_bytes=round((mem2 - mem0) / n, 1),
            sample_keys=sample,
        ),
        workers=Workers(
            processes=len(phase.usages),
            cpu_s=round(cpu, 3),
            cpu_us_per_transition=round(cpu * 1e6 / transitions, 1),
            cores_busy=round(cpu / phase.wall_s, 2) if phase.wall_s else 0.0,
            peak_rss_bytes=max(peaks),
            peak_rss_total_bytes=sum(peaks),
        ),
        server_forks={
            "aof_rewrites": forks1["aof_rewrites"] - forks0["aof_rewrites"],
            "rdb_saves": forks1["rdb_saves"] - forks0["rdb_saves"],
            "forks": forks1["total_forks"] - forks0["total_forks"],
            "latest_fork_usec": forks1["latest_fork_usec"],
        },
    )


@contextlib.contextmanager
def _server(settings: Settings, private: bool) -> Any:
    """The URL to bench against: a private embedded server, or the configured one."""
    if private:
        from saga.adapters.embedded_redis import EmbeddedServer

        tmp = Path(tempfile.mkdtemp(prefix="saga-bench-server-"))
        server = EmbeddedServer(data_dir=tmp, tied=True)
        server.start()
        try:
            yield server.url
        finally:
            server.stop()
            shutil.rmtree(tmp, ignore_errors=True)
    else:
        from saga.runtime import redis_url

        yield redis_url(settings)


class _Run:
    """One bench invocation on one server: the systems, then the saga-only checks."""

    def __init__(
        self,
        client: Any,
        cfg: BenchConfig,
        settings: Settings,
        url: str,
        endpoint: str,
        progress: Progress,
    ) -> None:
        self.client, self.cfg, self.settings, self.url = client, cfg, settings, url
        self.progress = progress
        self.base = f"bench-{secrets.token_hex(4)}"
        self.log_dir = Path(tempfile.mkdtemp(prefix="saga-bench-"))
        self.tenv = extras.tracing_env(cfg.tracing, endpoint)
        self.env = extras.worker_base_env(url, cfg.log_level, {})
        self.results: dict[str, SystemResult] = {}
        self.retention: Retention | None = None
        self.cold: ColdStart | None = None
        self.recovery: Recovery | None = None

    def system(self, name: str) -> System:
        if name == "saga":
            return SagaSystem(f"{self.base}.saga", self.settings.partitions, self.tenv)
        if name == "seed":
            return SeedSystem(f"{self.base}.seed")
        return MinimalSystem(f"{self.base}.min")

    async def after_saga(self, system: System, rids: Sequence[str]) -> None:
        """While the saga run's sagas still exist: their TTLs, and the CLI reading them."""
        assert isinstance(system, SagaSystem)
        self.retention = await extras.retention(
            self.client, system.keys, rids[-1], self.settings.limits.retention_s
        )
        if self.cfg.cli_runs > 0:
            self.progress(f"saga: CLI cold start, {self.cfg.cli_runs} runs each")
            cli_env = {**self.env, "SAGA_KEY_PREFIX": system.prefix}
            cli_env["SAGA_PARTITIONS"] = str(system.keys.partitions)
            self.cold = await anyio.to_thread.run_sync(
                extras.cold_start, cli_env, rids[-1], self.cfg.cli_runs
            )

    async def systems(self) -> None:
        for name in self.cfg.only:
            self.results[name] = await run_system(
                self.client,
                self.system(name),
                self.cfg,
                self.url,
                self.env,
                self.log_dir,
                self.progress,
                after=self.after_saga if name == "saga" else None,
            )

    async def checks(self) -> None:
        """Retention with a few seconds, and recovery of a killed worker (saga only)."""
        if self.retention is not None and self.cfg.retention_check:
            self.progress("saga: retention of a few seconds, two waves")
            prefix = f"{self.base}.exp"
            try:
                expiry = await extras.expiry(self.client, self.url, prefix, self.env, self.log_dir)
            finally:
                await _cleanup(self.client, f"{prefix}*")
            self.retention = msgspec.structs.replace(self.retention, expiry=expiry)
        if "saga" in self.cfg.only and self.cfg.recovery:
            self.progress("saga: recovery of a killed worker's step (shrunk lease)")
            prefix = f"{self.base}.rec"
            try:
                self.recovery = await extras.recovery(
                    self.client,
                    self.url,
                    prefix,
                    self.settings,
                    {**self.env, **self.tenv},
                    self.log_dir,
                )
            finally:
                await _cleanup(self.client, f"{prefix}*")

    async def close(self) -> None:
        with anyio.CancelScope(shield=True):
            await _cleanup(self.client, f"{self.base}*")
            await self.client.aclose()
        if self.cfg.keep_logs:
            self.progress(f"worker logs kept in {self.log_dir}")
        else:
            shutil.rmtree(self.log_dir, ignore_errors=True)


async def run_bench(
    cfg: BenchConfig, settings: Settings, command: str, progress: Progress
) -> Report:
    if settings.cluster:
        raise BenchError("saga bench needs a standalone server (SAGA_REDIS_CLUSTER is set)")
    started_at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    load_start = os.getloadavg()[0]
    code = await anyio.to_thread.run_sync(code_version)
    with _server(settings, cfg.private_server) as url, extras.otlp_sink() as (endpoint, sink):
        run = _Run(connect(url), cfg, settings, url, endpoint, progress)
        try:
            server = await server_info(run.client, url)
            await run.systems()
            await run.checks()
        except TimeoutError as exc:  # anyio.fail_after in a phase (an OSError subclass)
            raise BenchError(f"a bench phase timed out ({exc!r}); logs: --keep-logs") from exc
        finally:
            await run.close()
        exports = sink.received
    results = run.results
    saga = results.get("saga")
    vs_seed = ratios(saga, results["seed"]) if saga and "seed" in results else None
    vs_min = ratios(saga, results["minimal"]) if saga and "minimal" in results else None
    return Report(
        command=command,
        started_at=started_at,
        load_average=[round(load_start, 2), round(os.getloadavg()[0], 2)],
        code=code,
        params=Params(
            sagas=cfg.sagas,
            workers=cfg.workers,
            concurrency=cfg.concurrency,
            rate=cfg.rate,
            rate_seconds=cfg.rate_seconds,
            tracing=cfg.tracing,
            log_level=cfg.log_level,
            only=list(cfg.only),
            read_batch=settings.read_batch,
            partitions=settings.partitions,
        ),
        machine=machine(),
        server=server,
        systems=results,
        vs_seed=vs_seed,
        vs_minimal=vs_min,
        targets=targets(results, vs_seed, vs_min, run.retention),
        cold_start=run.cold,
        recovery=run.recovery,
        retention=run.retention,
        tracing=extras.tracing_report(cfg.tracing, exports),
    )
