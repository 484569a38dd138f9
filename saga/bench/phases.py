"""The two phases of one system's run, each with W fresh worker processes held at a
barrier until every one has imported its code:

1. Backlog (throughput and cost): N sagas are submitted first, then the workers
   are let go at once; the clock runs from the go signal to the last step's last
   commit, read from the system's own timestamps. INFO commandstats, INFO cpu and
   used_memory are read around it; each worker reports its round trips, CPU and
   peak memory when it exits.
2. Paced (latency): sagas are submitted at a fixed rate (default: half of the
   rate the backlog phase reached) to running workers; end-to-end latency and
   step hand-off come from this phase.

Also the deletion of a run's keys by prefix.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import anyio
import msgspec

from saga.bench.config import USERS, BenchConfig, BenchError
from saga.bench.measure import (
    Timing,
    commandstats_with_usec,
    delta,
    now_ms,
    pcts,
    server_cpu_s,
    server_time_ms,
)
from saga.bench.procs import WorkerSet
from saga.bench.report import Latency
from saga.bench.systems import STEPS, System


class Phase(msgspec.Struct, kw_only=True):
    timings: list[Timing]
    t_go_ms: float
    wall_s: float
    usages: list[Any]
    commands: dict[str, int]
    command_usec: dict[str, int] = {}
    """INFO commandstats usec deltas (a script's include the commands it calls)."""
    server_cpu_s: float
    startup_s: float = 0.0
    """Spawn to every worker's "ready" (imports and wiring), before the clock starts."""


class Load(msgspec.Struct, frozen=True):
    """What worker processes spent over a phase, per transition and per second."""

    cpu_s: float
    cpu_us_per_transition: float
    round_trips_per_transition: float
    cores_busy: float


def load_of(usages: Sequence[Any], transitions: int, wall_s: float) -> Load:
    cpu = sum(u.cpu_s for u in usages)
    trips = sum(u.round_trips for u in usages)
    return Load(
        cpu_s=round(cpu, 3),
        cpu_us_per_transition=round(cpu * 1e6 / transitions, 1),
        round_trips_per_transition=round(trips / transitions, 3),
        cores_busy=round(cpu / wall_s, 2) if wall_s > 0 else 0.0,
    )


async def cleanup(client: Any, pattern: str) -> int:
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


async def backlog(
    client: Any,
    system: System,
    cfg: BenchConfig,
    url: str,
    env: dict[str, str],
    log_dir: Path,
    rids: Sequence[str],
) -> Phase:
    with _workers(system, cfg, url, env, log_dir, f"{system.name}-backlog") as ws:
        spawned = time.monotonic()
        await ws.start()
        startup = time.monotonic() - spawned
        stats0, usec0 = await commandstats_with_usec(client)
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
        stats1, usec1 = await commandstats_with_usec(client)
        cpu1 = await server_cpu_s(client)
    commands = delta(stats1, stats0)
    for name, n in own.items():
        commands[name] = commands.get(name, 0) - n
    timings = await system.timings(client, rids)
    return Phase(
        timings=timings,
        t_go_ms=t_go,
        wall_s=wall,
        usages=usages,
        commands={k: v for k, v in commands.items() if v > 0},
        command_usec={k: v for k, v in delta(usec1, usec0).items() if v > 0},
        server_cpu_s=cpu1 - cpu0,
        startup_s=startup,
    )


async def paced(
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
        t_go = time.monotonic()
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
        wall = time.monotonic() - t_go
        load = load_of(await ws.stop(), count * len(STEPS), wall)
    timings = await system.timings(client, [r for r, _ in records])
    if len(timings) != count:
        raise BenchError(f"{system.name}: {len(timings)} of {count} paced sagas have timings")
    return Latency(
        target_rate=round(rate, 1),
        achieved_rate=round(count / submit_s, 1) if submit_s > 0 else 0.0,
        sagas=count,
        e2e_ms=pcts(t.e2e_ms for t in timings),
        handoff_ms=pcts(h for t in timings for h in t.handoffs_ms()),
        worker_cpu_us_per_transition=load.cpu_us_per_transition,
        round_trips_per_transition=load.round_trips_per_transition,
        worker_cores_busy=load.cores_busy,
    )
