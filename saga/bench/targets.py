"""saga's figures against the references (ratios) and against its goals (targets)."""

from __future__ import annotations

import os

from saga.bench.report import Ratios, Retention, SystemResult, Target

# Issue 23's goals, per step transition, default settings, logs at info.
MEMORY_PER_SAGA_B = 2048
WORKER_CPU_US = 90.0
SERVER_CPU_US = 40.0
COMMANDS = 8.0
HANDOFF_P50_MS = 3.0
HANDOFF_P99_MS = 20.0


def _ratio(a: float, b: float) -> float:
    return round(a / b, 3) if b else 0.0


def ratios(saga: SystemResult, ref: SystemResult) -> Ratios:
    lat, rlat = saga.latency, ref.latency
    return Ratios(
        transitions_per_s=_ratio(
            saga.throughput.transitions_per_s, ref.throughput.transitions_per_s
        ),
        round_trips_per_transition=_ratio(
            saga.redis.round_trips_per_transition, ref.redis.round_trips_per_transition
        ),
        commands_per_transition=_ratio(
            saga.redis.commands_per_transition, ref.redis.commands_per_transition
        ),
        memory_per_saga=_ratio(saga.memory.per_saga_bytes, ref.memory.per_saga_bytes),
        worker_cpu_per_transition=_ratio(
            saga.workers.cpu_us_per_transition, ref.workers.cpu_us_per_transition
        ),
        handoff_p50=_ratio(lat.handoff_ms.p50, rlat.handoff_ms.p50) if lat and rlat else None,
        e2e_p50=_ratio(lat.e2e_ms.p50, rlat.e2e_ms.p50) if lat and rlat else None,
        life_server_cpu_per_transition=_ratio(
            saga.redis.life_server_cpu_us_per_transition,
            ref.redis.life_server_cpu_us_per_transition,
        ),
        life_commands_per_transition=_ratio(
            saga.redis.life_commands_per_transition, ref.redis.life_commands_per_transition
        ),
    )


def targets(
    systems: dict[str, SystemResult],
    vs_seed: Ratios | None,
    vs_minimal: Ratios | None,
    retention: Retention | None,
    vs_batched: Ratios | None = None,
) -> list[Target]:
    saga = systems.get("saga")
    if saga is None:
        return []
    out = _cost_targets(saga, vs_seed, vs_minimal, vs_batched)
    out += _latency_targets(saga)
    per_saga = saga.memory.retained_per_saga_bytes
    out.append(
        Target(
            name="memory per saga",
            goal=f"<= {MEMORY_PER_SAGA_B} B per finished saga (streams trimmed)",
            value=f"{saga.memory.per_saga_bytes:.0f} B ({per_saga:.0f} B after trimming)",
            met=per_saga <= MEMORY_PER_SAGA_B,
        )
    )
    out.append(
        Target(
            name="two processes",
            goal=">= 1.5x the transitions/s of one process (compare --workers 1 and 2)",
            value=f"{saga.throughput.transitions_per_s:.0f}/s with "
            f"{saga.workers.processes} process(es); {_two_process_bound(saga)}",
            met=None,
        )
    )
    if retention is not None:
        out.append(_retention_target(retention))
    out.append(
        Target(
            name="linear cost",
            goal="transitions/s at 100,000 sagas within 20% of 1,000 (compare two runs)",
            value=f"{saga.throughput.transitions_per_s:.0f}/s at {saga.sagas} sagas",
            met=None,
        )
    )
    return out


def _cost_targets(
    saga: SystemResult,
    vs_seed: Ratios | None,
    vs_minimal: Ratios | None,
    vs_batched: Ratios | None = None,
) -> list[Target]:
    out: list[Target] = []
    if vs_batched is not None:
        out.append(
            Target(
                name="throughput vs batched seed",
                goal=">= the seed protocol batched x10 and pipelined",
                value=f"{vs_batched.transitions_per_s:.2f}x",
                met=vs_batched.transitions_per_s >= 1,
            )
        )
    if vs_seed is not None:
        out.append(
            Target(
                name="throughput vs seed",
                goal=">= 3x the seed protocol's transitions/s",
                value=f"{vs_seed.transitions_per_s:.2f}x",
                met=vs_seed.transitions_per_s >= 3,
            )
        )
    r, w = saga.redis, saga.workers
    out += [
        Target(
            name="server CPU",
            goal=f"<= {SERVER_CPU_US:g} us of Redis CPU per transition",
            value=f"{r.server_cpu_us_per_transition:.1f} us",
            met=r.server_cpu_us_per_transition <= SERVER_CPU_US,
        ),
        Target(
            name="commands",
            goal=f"<= {COMMANDS:g} server commands per transition",
            value=f"{r.commands_per_transition:.1f}",
            met=r.commands_per_transition <= COMMANDS,
        ),
        Target(
            name="worker CPU",
            goal=f"<= {WORKER_CPU_US:g} us of worker CPU per transition",
            value=f"{w.cpu_us_per_transition:.1f} us",
            met=w.cpu_us_per_transition <= WORKER_CPU_US,
        ),
    ]
    rt = r.round_trips_per_transition
    out.append(
        Target(
            name="round trips",
            goal="<= 2 round trips per transition, amortized",
            value=f"{rt:.2f}",
            met=rt <= 2,
        )
    )
    if vs_minimal is not None:
        out.append(
            Target(
                name="throughput vs minimal",
                goal=">= 50% of minimal's transitions/s",
                value=f"{vs_minimal.transitions_per_s * 100:.0f}%",
                met=vs_minimal.transitions_per_s >= 0.5,
            )
        )
    return out


def _latency_targets(saga: SystemResult) -> list[Target]:
    if saga.latency is None:
        return []
    h = saga.latency.handoff_ms
    at = f"at {saga.latency.achieved_rate:.0f} sagas/s"
    return [
        Target(
            name="hand-off p50",
            goal=f"<= {HANDOFF_P50_MS:g} ms at half of max throughput",
            value=f"{h.p50:.1f} ms {at}",
            met=h.p50 <= HANDOFF_P50_MS,
        ),
        Target(
            name="hand-off p99",
            goal=f"<= {HANDOFF_P99_MS:g} ms at half of max throughput",
            value=f"{h.p99:.1f} ms {at}",
            met=h.p99 <= HANDOFF_P99_MS,
        ),
    ]


def _retention_target(retention: Retention) -> Target:
    value = f"deleted in {retention.saga_ttl_s} s of {retention.setting_s} s"
    met = retention.ok
    if retention.expiry is not None:
        e = retention.expiry
        value += (
            f"; after expiry {e.bytes_left_per_saga:.0f} B/saga left, indexes after "
            f"a second wave of {e.sagas_per_wave}: "
            + ", ".join(f"{k} {v}" for k, v in e.index_entries_after_second_wave.items())
        )
        met = met and e.bounded
    return Target(
        name="retention",
        goal="finished sagas expire (SAGA_RETENTION_DAYS) and memory stays bounded",
        value=value,
        met=met,
    )


def _two_process_bound(saga: SystemResult) -> str:
    """What a second worker process can add where the server shares this machine's
    cores: with w µs of worker CPU and r µs of server CPU per transition, one process
    runs at most 1/w transitions/s and N on C cores at most C/(w + r), so the gain is
    at most C·w/(w + r), and never more than 2 (nor w/r, the server's own ceiling)."""
    w = saga.workers.cpu_us_per_transition
    r = saga.redis.server_cpu_us_per_transition
    cores = os.cpu_count() or 1
    if w <= 0 or r <= 0:
        return "bound unknown"
    bound = min(2.0, cores * w / (w + r), w / r)
    return f"at most {bound:.2f}x on {cores} cores shared with the server"
