"""The bench report's typed results: the ``--json`` document and its parts.

Ratios and targets are computed in ``saga.bench.targets``; the human table is in
``saga.bench.render``."""

from __future__ import annotations

import msgspec

from saga.bench.measure import CodeVersion, Machine, Pcts, ServerInfo


class Params(msgspec.Struct, frozen=True, kw_only=True):
    sagas: int
    workers: int
    concurrency: int
    rate: float | None
    """Sagas/s of the latency phase; None = half of each system's measured maximum."""
    rate_seconds: float
    tracing: bool
    trace_ratio: float = 1.0
    log_level: str
    page_bytes: int = 0
    """Page text the saga router stored per saga (the parser loads and deletes it)."""
    only: list[str]
    read_batch: int
    partitions: int


class Throughput(msgspec.Struct, frozen=True, kw_only=True):
    """The backlog phase: N sagas submitted first, then the workers let go at once."""

    elapsed_s: float
    """From the go signal to the last step's last commit (the system's own stamps)."""
    sagas_per_s: float
    transitions_per_s: float
    wall_s: float
    """Driver's view: go to completion noticed, plus worker stop (includes polling)."""
    e2e_ms: Pcts
    """Created → completed in the backlog (mostly queueing: every saga waits its turn)."""
    handoff_ms: Pcts


class Latency(msgspec.Struct, frozen=True, kw_only=True):
    """The paced phase: sagas submitted at a fixed rate to already-running workers."""

    target_rate: float
    achieved_rate: float
    sagas: int
    e2e_ms: Pcts
    handoff_ms: Pcts
    worker_cpu_us_per_transition: float = 0.0
    """The workers' CPU over the phase (go to the last commit) per transition: at a
    paced rate reads and claims come in small batches, so a transition costs more
    than in the backlog phase."""
    round_trips_per_transition: float = 0.0
    """The workers' round trips over the phase per transition: batches are smaller
    at a paced rate than in the backlog, so there are more of them."""
    worker_cores_busy: float = 0.0
    """The same CPU over the phase's wall time: how busy the workers were while the
    latency was measured ("half of the maximum" rate is not half of a core)."""


class RedisCost(msgspec.Struct, frozen=True, kw_only=True):
    commands_per_transition: float
    """Every command the server ran (INFO commandstats delta, including commands
    inside scripts), minus the driver's own polling, per step transition."""
    commands: dict[str, float]
    """The same, per command name, per transition."""
    command_us: dict[str, float] = {}
    """Server time per command name, µs per transition (INFO commandstats usec): a
    script's (``evalsha``) includes the commands it calls, listed on their own too."""
    round_trips_per_transition: float
    """Client socket writes of the worker processes per transition: a command sent
    alone is one, a pipeline is one whatever its length."""
    round_trips: dict[str, float]
    """Per transition: single commands by name, and ``pipeline`` for whole pipelines."""
    server_cpu_us_per_transition: float
    life_commands_per_transition: float = 0.0
    """Commands over a saga's whole life per step transition: the start (submission)
    and the backlog phase; the retention sweep is not in it (it runs days later, once
    per ended saga: docs/benchmarks.md)."""
    life_server_cpu_us_per_transition: float = 0.0
    """Server CPU of the same, µs per step transition."""


class Memory(msgspec.Struct, frozen=True, kw_only=True):
    per_saga_bytes: float
    """used_memory delta / N right after the last saga finished (history, outputs,
    indexes and the not yet trimmed stream entries)."""
    retained_per_saga_bytes: float
    """The same after acknowledged stream entries are trimmed: what a finished saga
    keeps until its retention expires."""
    sample_keys: dict[str, int] = {}
    """MEMORY USAGE of one finished saga's own keys, by kind."""
    by_kind_per_saga: dict[str, float] = {}
    """After trimming: MEMORY USAGE of the run's keys by kind of key (``saga``, ``hist``,
    ``idx:created``, ``ready`` ...) over N, and ``overhead``: retained bytes per saga
    that no key's MEMORY USAGE holds (keyspace entries, expiries, the allocator)."""


class Workers(msgspec.Struct, frozen=True, kw_only=True):
    processes: int
    cpu_s: float
    """User + system CPU of all worker processes from go to exit."""
    cpu_us_per_transition: float
    cores_busy: float
    """cpu_s / elapsed: how many cores the workers kept busy."""
    peak_rss_bytes: int
    """The largest peak resident memory of one worker process."""
    peak_rss_total_bytes: int
    startup_s: float = 0.0
    """From spawning the worker processes until every one was wired and ready (imports,
    client, scripts, groups): not part of the throughput, which starts at the go."""


class SystemResult(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    sagas: int
    transitions: int
    throughput: Throughput
    latency: Latency | None
    redis: RedisCost
    memory: Memory
    workers: Workers
    server_forks: dict[str, int] = {}
    """Background saves while this system ran (AOF rewrites, forks; latest fork in µs):
    a fork of a large dataset stalls the server and shows in the latency tails."""


class Ratios(msgspec.Struct, frozen=True, kw_only=True):
    """saga's figure divided by the reference's (throughput: higher is better for saga;
    the rest: lower is better for saga)."""

    transitions_per_s: float
    round_trips_per_transition: float
    commands_per_transition: float
    memory_per_saga: float
    worker_cpu_per_transition: float
    handoff_p50: float | None
    e2e_p50: float | None
    life_server_cpu_per_transition: float | None = None
    """Server CPU over a saga's whole life (start included), saga's over the reference's."""
    life_commands_per_transition: float | None = None


class Target(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    goal: str
    value: str
    met: bool | None
    """None: not decidable in this run (see ``goal``)."""


class ColdStart(msgspec.Struct, frozen=True, kw_only=True):
    runs: int
    show_json_ms: float
    """Median wall time of ``saga show --json <id>``."""
    top_once_json_ms: float
    """Median of ``saga top --once --json`` (it samples twice, 1 s apart by default)."""
    top_once_json_interval0_ms: float
    """Median of ``saga top --once --json --interval 0`` (one sample: the start-up cost)."""


class StepRecovery(msgspec.Struct, frozen=True, kw_only=True):
    step: str
    lease_s: float
    earliest_s: float
    """Killed just before its next heartbeat, found by a recovery pass at once:
    2/3 of the lease + margin."""
    latest_s: float
    """Killed just after a heartbeat, found a whole recovery interval late:
    lease + margin + interval."""


class Recovery(msgspec.Struct, frozen=True, kw_only=True):
    recovery_interval_s: float
    idle_margin_s: float
    defaults: list[StepRecovery]
    """Computed from the settings: the entry's idle clock restarts at each heartbeat
    (every lease/3); it is taken over once idle for lease + margin, by the next
    recovery pass (every recovery_interval)."""
    measured_lease_s: float
    measured_interval_s: float
    measured_expected_s: list[float]
    """[earliest, latest] for the shrunk settings."""
    measured_reclaim_s: float
    """SIGKILL of the worker to the 'reclaimed' history event."""
    measured_complete_s: float
    """SIGKILL to the saga completed by the other worker."""


class Expiry(msgspec.Struct, frozen=True, kw_only=True):
    """Two waves of sagas with a retention of a few seconds: what is left of the first
    wave once it expired, and after the second wave's commits pruned the indexes."""

    sagas_per_wave: int
    retention_s: int
    keys_left: dict[str, int]
    """After the first wave expired: keys of the run's prefix by kind."""
    bytes_left_per_saga: float
    """used_memory after the first wave expired, over its sagas (streams trimmed)."""
    index_entries_after_second_wave: dict[str, int]
    """Entries of each index once the second wave finished: bounded if about one wave."""
    bounded: bool
    """No per-saga key is left, and every index holds about one wave only."""


class Retention(msgspec.Struct, frozen=True, kw_only=True):
    setting_s: int
    """SAGA_RETENTION_DAYS in seconds."""
    saga_ttl_s: int
    """Seconds until a finished saga's retention ends (its 'ret'; -1: none): the
    maintenance sweep then deletes its hash and history. (Named for the TTL that
    did this before the sweep did.)"""
    history_ttl_s: int
    """Seconds until the saga is due in its partition's retired set (-1: not there)."""
    ok: bool
    """Both are within the setting."""
    expiry: Expiry | None = None


class Tracing(msgspec.Struct, frozen=True, kw_only=True):
    requested: bool
    telemetry_module: bool
    """Whether ``saga.telemetry`` exists in this build."""
    exports_received: int
    """OTLP requests the bench's local sink got from the saga workers."""
    note: str


class Report(msgspec.Struct, frozen=True, kw_only=True):
    version: int = 1
    command: str
    scenario: str = "default"
    """The workload (``--scenario``): ``default`` is N three-step no-op sagas."""
    started_at: str
    load_average: list[float]
    """1-minute load average of the machine at the start and at the end of the run
    (other processes on a shared machine show here)."""
    code: CodeVersion
    params: Params
    machine: Machine
    server: ServerInfo
    systems: dict[str, SystemResult]
    vs_seed: Ratios | None
    vs_minimal: Ratios | None
    vs_batched: Ratios | None = None
    """saga against the seed's protocol batched x10 and pipelined (``seed_batched``)."""
    targets: list[Target]
    cold_start: ColdStart | None
    recovery: Recovery | None
    retention: Retention | None
    tracing: Tracing
