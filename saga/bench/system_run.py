"""One system's run: submit the sagas, the backlog and paced phases, then the
figures of its result (throughput, Redis cost, memory, worker usage)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from saga.bench.config import USERS, BenchConfig, BenchError, Progress
from saga.bench.measure import (
    commandstats_with_usec,
    delta,
    forks,
    pcts,
    server_cpu_s,
    settle_memory,
    used_memory,
)
from saga.bench.memory_map import memory_by_kind
from saga.bench.phases import Phase, backlog, cleanup, load_of, paced
from saga.bench.report import Memory, RedisCost, SystemResult, Throughput, Workers
from saga.bench.systems import STEPS, System, memory_of


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
        stats0, cpu0 = (await commandstats_with_usec(client))[0], await server_cpu_s(client)
        await system.submit(client, records)
        stats1, cpu1 = (await commandstats_with_usec(client))[0], await server_cpu_s(client)
        start = _Start(commands=sum(delta(stats1, stats0).values()) - 1, cpu_s=cpu1 - cpu0)
        progress(f"{system.name}: {cfg.workers} worker(s) x concurrency {cfg.concurrency}, backlog")
        phase = await backlog(client, system, cfg, url, env, log_dir, rids)
        if len(phase.timings) != n:
            raise BenchError(f"{system.name}: {len(phase.timings)} of {n} sagas have timings")
        mem1 = await used_memory(client)
        await system.trim(client)
        mem2 = await used_memory(client)
        sample = await memory_of(client, system.record_keys(rids[n // 2]))
        by_kind = {
            k: round(v / n, 1) for k, v in (await memory_by_kind(client, system.prefix)).items()
        }
        by_kind["overhead"] = round((mem2 - mem0) / n - sum(by_kind.values()), 1)
        throughput = _throughput(phase, n, transitions)
        progress(
            f"{system.name}: {throughput.transitions_per_s:,.0f} transitions/s "
            f"({throughput.elapsed_s:.2f} s)"
        )
        latency = None
        if cfg.rate != 0:
            rate = cfg.rate or throughput.sagas_per_s / 2
            progress(f"{system.name}: paced phase at {rate:,.0f} sagas/s")
            latency = await paced(client, system, cfg, url, env, log_dir, rate, n)
        forks1 = await forks(client)
        if after is not None:
            await after(system, rids)
    finally:
        await cleanup(client, f"{system.prefix}*")
    return SystemResult(
        name=system.name,
        sagas=n,
        transitions=transitions,
        throughput=throughput,
        latency=latency,
        redis=_redis_cost(phase, transitions, start),
        memory=Memory(
            per_saga_bytes=round((mem1 - mem0) / n, 1),
            retained_per_saga_bytes=round((mem2 - mem0) / n, 1),
            sample_keys=sample,
            by_kind_per_saga=by_kind,
        ),
        workers=_workers(phase, transitions),
        server_forks=_server_forks(forks0, forks1),
    )


def _throughput(phase: Phase, n: int, transitions: int) -> Throughput:
    last = max(t.committed_ms[-1] for t in phase.timings)
    elapsed = max((last - phase.t_go_ms) / 1000, 1e-6)
    return Throughput(
        elapsed_s=round(elapsed, 3),
        sagas_per_s=round(n / elapsed, 1),
        transitions_per_s=round(transitions / elapsed, 1),
        wall_s=round(phase.wall_s, 3),
        e2e_ms=pcts(t.e2e_ms for t in phase.timings),
        handoff_ms=pcts(h for t in phase.timings for h in t.handoffs_ms()),
    )


class _Start:
    """What submitting the sagas cost the server (the driver's INFO excluded)."""

    def __init__(self, commands: int, cpu_s: float) -> None:
        self.commands, self.cpu_s = max(commands, 0), max(cpu_s, 0.0)


def _redis_cost(phase: Phase, transitions: int, start: _Start) -> RedisCost:
    trips = sum(u.round_trips for u in phase.usages)
    singles: Counter[str] = Counter()
    for u in phase.usages:
        singles.update(u.single_commands)
    breakdown = {k: round(v / transitions, 4) for k, v in sorted(singles.items())}
    breakdown["pipeline"] = round((trips - sum(singles.values())) / transitions, 4)
    total_cmds = sum(phase.commands.values())
    return RedisCost(
        commands_per_transition=round(total_cmds / transitions, 3),
        commands={k: round(v / transitions, 4) for k, v in phase.commands.items()},
        command_us={k: round(v / transitions, 3) for k, v in phase.command_usec.items()},
        round_trips_per_transition=round(trips / transitions, 3),
        round_trips=breakdown,
        server_cpu_us_per_transition=round(phase.server_cpu_s * 1e6 / transitions, 2),
        life_commands_per_transition=round((total_cmds + start.commands) / transitions, 3),
        life_server_cpu_us_per_transition=round(
            (phase.server_cpu_s + start.cpu_s) * 1e6 / transitions, 2
        ),
    )


def _workers(phase: Phase, transitions: int) -> Workers:
    load = load_of(phase.usages, transitions, phase.wall_s)
    peaks = [u.peak_rss_bytes for u in phase.usages] or [0]
    return Workers(
        processes=len(phase.usages),
        cpu_s=load.cpu_s,
        cpu_us_per_transition=load.cpu_us_per_transition,
        cores_busy=load.cores_busy,
        peak_rss_bytes=max(peaks),
        peak_rss_total_bytes=sum(peaks),
        startup_s=round(phase.startup_s, 3),
    )


def _server_forks(forks0: dict[str, int], forks1: dict[str, int]) -> dict[str, int]:
    return {
        "aof_rewrites": forks1["aof_rewrites"] - forks0["aof_rewrites"],
        "rdb_saves": forks1["rdb_saves"] - forks0["rdb_saves"],
        "forks": forks1["total_forks"] - forks0["total_forks"],
        "latest_fork_usec": forks1["latest_fork_usec"],
    }
