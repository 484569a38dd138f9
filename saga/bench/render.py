"""The bench report for people: one table, the targets, and the extras."""

from __future__ import annotations

from saga.bench.report import Report, rows
from saga.cli.common import colour, table


def render(report: Report) -> str:
    m, s, p = report.machine, report.server, report.params
    load = " -> ".join(f"{x:g}" for x in report.load_average)
    out = [
        report.command,
        f"machine: {m.nproc} cores, {m.cpu_model}, {m.ram_bytes / 2**30:.1f} GiB RAM, "
        f"Python {m.python}, load average {load}",
        f"server: {s.name} {s.version} over {s.transport}, appendonly {s.appendonly}; "
        f"code {report.code.commit or '?'}"
        + (f" + uncommitted {', '.join(report.code.dirty)}" if report.code.dirty else ""),
        f"{p.sagas} sagas, {p.workers} worker process(es), concurrency {p.concurrency} per step, "
        f"read batch {p.read_batch}, log level {p.log_level}, tracing "
        f"{'on' if p.tracing else 'off'}",
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
            f"retention: a finished saga's hash and history expire in {r2.saga_ttl_s} s / "
            f"{r2.history_ttl_s} s (SAGA_RETENTION_DAYS = {r2.setting_s / 86400:g} d)"
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
    out.append(f"tracing: {report.tracing.note}")
    return "\n".join(out)
