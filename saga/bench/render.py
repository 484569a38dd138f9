"""The bench report for people: one table, the targets, and the extras."""

from __future__ import annotations

from saga.bench.measure import Pcts
from saga.bench.report import Report, SystemResult
from saga.cli.common import colour, table


def render(report: Report) -> str:
    m, s, p = report.machine, report.server, report.params
    load = " -> ".join(f"{x:g}" for x in report.load_average)
    out = [
        report.command,
        f"machine: {m.nproc} cores, {m.cpu_model}, {m.ram_bytes / 2**30:.1f} GiB RAM, "
        f"Python {m.python}, load average {load}",
        f"server: {s.name} {s.version} over {s.transport}, appendonly {s.appendonly}, "
        f"malloc {s.allocator}; "
        f"code {report.code.commit or '?'}"
        + (f" + uncommitted {', '.join(report.code.dirty)}" if report.code.dirty else ""),
        f"scenario {report.scenario}: {p.sagas} sagas, {p.workers} worker process(es), "
        f"concurrency {p.concurrency} per step, "
        f"read batch {p.read_batch}, log level {p.log_level}, tracing "
        f"{'on' if p.tracing else 'off'}"
        + (f" (ratio {p.trace_ratio:g})" if p.tracing and p.trace_ratio < 1 else "")
        + (f", saga pages {p.page_bytes:,} B per saga" if p.page_bytes else ""),
        "",
    ]
    headers, body = rows(report)
    out.append(table(headers, body))
    if report.targets:
        out += ["", "targets:"]
        for t in report.targets:
            mark = {True: colour("met", "32"), False: colour("MISSED", "31"), None: "n/a"}[t.met]
            out.append(f"  {mark:>6}  {t.name}: {t.value}  (goal {t.goal})")
    if report.cold_start:
        c = report.cold_start
        out += [
            "",
            f"CLI cold start (median of {c.runs}): show --json {c.show_json_ms:.0f} ms; "
            f"top --once --json {c.top_once_json_ms:.0f} ms "
            f"({c.top_once_json_interval0_ms:.0f} ms with --interval 0)",
        ]
    if report.recovery:
        r = report.recovery
        spans = ", ".join(f"{d.step} {d.earliest_s:g}-{d.latest_s:g} s" for d in r.defaults)
        out += [
            f"recovery of a killed worker's step, default settings (recovery every "
            f"{r.recovery_interval_s:g} s, lease + {r.idle_margin_s:g} s idle): {spans}",
            f"  measured with lease {r.measured_lease_s:g} s, interval "
            f"{r.measured_interval_s:g} s: reclaimed after {r.measured_reclaim_s:.2f} s, "
            f"completed after {r.measured_complete_s:.2f} s (expected "
            f"{r.measured_expected_s[0]:g}-{r.measured_expected_s[1]:g} s)",
        ]
    if report.retention:
        r2 = report.retention
        out.append(
            f"retention: a finished saga's hash and history are deleted in {r2.saga_ttl_s} s"
            f" (due in the retired set in {r2.history_ttl_s} s; SAGA_RETENTION_DAYS = "
            f"{r2.setting_s / 86400:g} d)"
        )
        if r2.expiry is not None:
            e = r2.expiry
            left = ", ".join(f"{k} {v}" for k, v in e.keys_left.items())
            idx = ", ".join(f"{k} {v}" for k, v in e.index_entries_after_second_wave.items())
            out.append(
                f"  with {e.retention_s} s: after {e.sagas_per_wave} sagas expired, keys left: "
                f"{left} ({e.bytes_left_per_saga:.0f} B/saga); index entries after a second "
                f"wave: {idx} ({'bounded' if e.bounded else 'NOT bounded'})"
            )
    saga = report.systems.get("saga")
    if saga is not None and saga.memory.sample_keys:
        parts = ", ".join(f"{k} {v} B" for k, v in saga.memory.sample_keys.items())
        out.append(f"memory of one finished saga: {parts}")
    for name, res in report.systems.items():
        if res.redis.command_us:
            top = sorted(res.redis.command_us.items(), key=lambda kv: -kv[1])[:8]
            parts = ", ".join(f"{k} {v:.1f}" for k, v in top)
            out.append(f"server us per transition by command, {name}: {parts}")
        if res.memory.by_kind_per_saga:
            kinds = sorted(res.memory.by_kind_per_saga.items(), key=lambda kv: -kv[1])
            parts = ", ".join(f"{k} {v:,.0f}" for k, v in kinds)
            out.append(f"memory per saga by kind of key, {name} (B): {parts}")
    out.append(f"tracing: {report.tracing.note}")
    return "\n".join(out)


# -- the table ---------------------------------------------------------------------------
def _rate(r: SystemResult) -> str:
    return _num(r.latency.achieved_rate) if r.latency is not None else "-"


def _num(x: float, digits: int = 0) -> str:
    return f"{x:,.{digits}f}"


def _lat(r: SystemResult, which: str) -> str:
    if r.latency is None:
        return "-"
    p: Pcts = getattr(r.latency, which)
    return f"{p.p50:.1f} / {p.p95:.1f} / {p.p99:.1f}"


def _hand(r: SystemResult) -> str:
    if r.latency is None:
        return "-"
    return f"{r.latency.handoff_ms.p50:.1f} / {r.latency.handoff_ms.p99:.1f}"


def _paced_cpu(r: SystemResult) -> str:
    return _num(r.latency.worker_cpu_us_per_transition, 1) if r.latency is not None else "-"


def _paced_busy(r: SystemResult) -> str:
    return _num(r.latency.worker_cores_busy, 2) if r.latency is not None else "-"


def _paced_trips(r: SystemResult) -> str:
    return _num(r.latency.round_trips_per_transition, 2) if r.latency is not None else "-"


class _Columns:
    """The table's columns: one per system, then saga's ratio to each reference run."""

    def __init__(self, report: Report) -> None:
        self.report = report
        self.names = list(report.systems)
        vs = (("seed", report.vs_seed), ("batched", report.vs_batched),
              ("minimal", report.vs_minimal))  # fmt: skip
        self.refs = [(name, r) for name, r in vs if r is not None]

    def headers(self) -> list[str]:
        return ["", *self.names, *(f"saga/{name}" for name, _ in self.refs)]

    def line(self, label: str, values: list[str], *ratios: str) -> list[str]:
        extra = list(ratios) + [""] * (len(self.refs) - len(ratios))
        return [label, *values, *extra]

    def ratio(self, attr: str) -> list[str]:
        out = []
        for _, r in self.refs:
            a = getattr(r, attr, None)
            out.append(f"{a:.2f}x" if a is not None else "-")
        return out

    def relative(self) -> list[str]:
        """Each system's transitions/s over saga's (the issue's "relative to saga")."""
        s = self.report.systems
        base = s["saga"].throughput.transitions_per_s if "saga" in s else 0.0
        return [_num(s[n].throughput.transitions_per_s / base, 2) if base else "-"
                for n in self.names]  # fmt: skip


def rows(report: Report) -> tuple[list[str], list[list[str]]]:
    c = _Columns(report)
    return c.headers(), [*_speed_rows(c), *_cost_rows(c)]


def _speed_rows(c: _Columns) -> list[list[str]]:
    s, names, line, ratio = c.report.systems, c.names, c.line, c.ratio
    return [
        line(
            "transitions/s",
            [_num(s[n].throughput.transitions_per_s) for n in names],
            *ratio("transitions_per_s"),
        ),
        line("  relative to saga", c.relative()),
        line("sagas/s", [_num(s[n].throughput.sagas_per_s) for n in names]),
        line("elapsed s (backlog)", [_num(s[n].throughput.elapsed_s, 2) for n in names]),
        line(
            "latency phase rate /s",
            [_rate(s[n]) for n in names],
        ),
        line("e2e ms p50/p95/p99", [_lat(s[n], "e2e_ms") for n in names], *ratio("e2e_p50")),
        line("hand-off ms p50/p99", [_hand(s[n]) for n in names], *ratio("handoff_p50")),
        line("  paced worker CPU us/transition", [_paced_cpu(s[n]) for n in names]),
        line("  paced worker cores busy", [_paced_busy(s[n]) for n in names]),
        line("  paced round trips/transition", [_paced_trips(s[n]) for n in names]),
    ]


def _cost_rows(c: _Columns) -> list[list[str]]:
    s, names, line, ratio = c.report.systems, c.names, c.line, c.ratio
    return [
        line(
            "round trips/transition",
            [_num(s[n].redis.round_trips_per_transition, 2) for n in names],
            *ratio("round_trips_per_transition"),
        ),
        line(
            "commands/transition",
            [_num(s[n].redis.commands_per_transition, 1) for n in names],
            *ratio("commands_per_transition"),
        ),
        line(
            "server CPU us/transition",
            [_num(s[n].redis.server_cpu_us_per_transition, 1) for n in names],
        ),
        line(
            "  whole life, start incl.",
            [_num(s[n].redis.life_server_cpu_us_per_transition, 1) for n in names],
            *ratio("life_server_cpu_per_transition"),
        ),
        line(
            "  commands, start incl.",
            [_num(s[n].redis.life_commands_per_transition, 1) for n in names],
            *ratio("life_commands_per_transition"),
        ),
        line(
            "memory B/saga",
            [_num(s[n].memory.per_saga_bytes) for n in names],
            *ratio("memory_per_saga"),
        ),
        line(
            "  after trimming",
            [_num(s[n].memory.retained_per_saga_bytes) for n in names],
        ),
        line(
            "worker CPU us/transition",
            [_num(s[n].workers.cpu_us_per_transition, 1) for n in names],
            *ratio("worker_cpu_per_transition"),
        ),
        line("worker cores busy", [_num(s[n].workers.cores_busy, 2) for n in names]),
        line(
            "worker peak RSS MiB",
            [_num(s[n].workers.peak_rss_bytes / 2**20, 1) for n in names],
        ),
        line("worker start-up s", [_num(s[n].workers.startup_s, 2) for n in names]),
    ]
