"""The bench's arithmetic and reports, without Redis."""

from __future__ import annotations

import argparse
from typing import Any

import pytest

from saga.bench import extras, report, tracing_sink
from saga.bench.measure import Pcts, Timing, pcts, stamps, timing_from_stamps
from saga.bench.pipelines import PAGE_CHARS, page_texts
from saga.bench.systems import saga_timing
from saga.bench.targets import ratios, targets
from saga.cli.cmd_bench import canonical
from saga.config.settings import Settings
from saga.state.model import EventType, HistoryEvent


def test_percentiles_by_nearest_rank() -> None:
    p = pcts(float(x) for x in range(1, 101))
    assert (p.n, p.p50, p.p95, p.p99, p.max, p.mean) == (100, 50.0, 95.0, 99.0, 100.0, 50.5)
    assert pcts([]) == Pcts(0, 0.0, 0.0, 0.0, 0.0, 0.0)
    assert pcts([7.0]).p99 == 7.0


def test_timings_from_stamps_and_history() -> None:
    t = timing_from_stamps(stamps("100,101,103,110,111,115,116"), 3)
    assert t == Timing(100.0, (101.0, 110.0, 115.0), (103.0, 111.0, 116.0))
    assert t.e2e_ms == 16.0 and t.handoffs_ms() == [7.0, 4.0]

    def ev(kind: EventType, step: str, at: int, took: int = 0) -> HistoryEvent:
        return HistoryEvent(id=f"{at}-0", event=kind, at_ms=at, step=step, duration_ms=took)

    # A step's claim is its commit's time less the commit's duration.
    events = [
        ev(EventType.STARTED, "router", 100),
        ev(EventType.RECLAIMED, "router", 105),
        ev(EventType.COMMITTED, "router", 106, took=1),
        ev(EventType.COMMITTED, "parser", 109, took=1),
        ev(EventType.COMMITTED, "grouper", 112, took=3),
    ]
    timing = saga_timing(events)
    assert timing == Timing(100.0, (105.0, 108.0, 109.0), (106.0, 109.0, 112.0))
    assert saga_timing(events[:-1]) is None  # unfinished


def _result(tps: float, trips: float, handoff: float) -> report.SystemResult:
    p = Pcts(10, handoff, handoff, handoff, handoff, handoff)
    return report.SystemResult(
        name="x",
        sagas=10,
        transitions=30,
        throughput=report.Throughput(
            elapsed_s=1, sagas_per_s=tps / 3, transitions_per_s=tps, wall_s=1, e2e_ms=p,
            handoff_ms=p,
        ),
        latency=report.Latency(target_rate=1, achieved_rate=1, sagas=10, e2e_ms=p, handoff_ms=p),
        redis=report.RedisCost(
            commands_per_transition=10, commands={}, round_trips_per_transition=trips,
            round_trips={}, server_cpu_us_per_transition=1,
        ),
        memory=report.Memory(per_saga_bytes=100, retained_per_saga_bytes=90),
        workers=report.Workers(
            processes=1, cpu_s=1, cpu_us_per_transition=100, cores_busy=1,
            peak_rss_bytes=1, peak_rss_total_bytes=1,
        ),
    )  # fmt: skip


def test_ratios_and_targets() -> None:
    saga, seed, floor = _result(3000, 0.1, 2), _result(1000, 7, 3), _result(5000, 0.05, 1)
    vs_seed, vs_min = ratios(saga, seed), ratios(saga, floor)
    assert vs_seed.transitions_per_s == 3.0 and vs_min.transitions_per_s == 0.6
    batched = _result(2900, 0.3, 2)
    vs_bat = ratios(saga, batched)
    met = {t.name: t.met for t in targets({"saga": saga}, vs_seed, vs_min, None, vs_bat)}
    assert met == {
        "throughput vs batched seed": True,
        "throughput vs seed": True,
        "server CPU": True,
        "commands": False,  # 10 per transition, goal <= 8
        "worker CPU": False,  # 100 us, goal <= 90
        "round trips": True,
        "throughput vs minimal": True,
        "hand-off p50": True,
        "hand-off p99": True,
        "memory per saga": True,
        "two processes": None,
        "linear cost": None,
    }
    assert not {
        t.met
        for t in targets({"saga": saga}, vs_seed, vs_min, None, ratios(saga, _result(3100, 0.3, 2)))
        if t.name == "throughput vs batched seed"
    }.pop()
    slow = _result(2000, 2.5, 60)
    met = {
        t.name: t.met
        for t in targets({"saga": slow}, ratios(slow, seed), ratios(slow, floor), None)
    }
    assert met["throughput vs seed"] is False and met["round trips"] is False
    assert met["throughput vs minimal"] is False and met["hand-off p99"] is False


def test_canonical_command_spells_out_every_option() -> None:
    args = argparse.Namespace(
        sagas=1000, workers=2, concurrency=64, rate=None, rate_seconds=10.0, tracing="off",
        trace_ratio=1.0,
        log_level="info", page_bytes=0, cli_runs=10, no_recovery=False, no_retention_check=False,
        private_server=True, keep_logs=False, json=True,
    )  # fmt: skip
    args.scenario = "default"
    assert canonical(args, ("saga", "seed", "batched", "minimal")) == (
        "saga bench --sagas 1000 --workers 2 --concurrency 64 --rate-seconds 10 "
        "--tracing off --log-level info --private-server --json"
    )
    assert "--only seed" in canonical(args, ("seed",))
    args.tracing, args.trace_ratio = "on", 0.1
    assert "--tracing on --trace-ratio 0.1 --log-level" in canonical(args, ("saga",))
    args.page_bytes = 4096
    assert "--log-level info --page-bytes 4096 --only saga" in canonical(args, ("saga",))


def test_page_texts_add_up_to_the_size_asked_in_pages_of_bounded_size() -> None:
    for total in (1, PAGE_CHARS - 1, PAGE_CHARS, 5 * PAGE_CHARS + 7):
        pages = page_texts(total)
        assert sum(len(p) for p in pages) == total
        assert all(0 < len(p) <= PAGE_CHARS for p in pages)
        assert len(pages) == -(-total // PAGE_CHARS)


def test_tracing_env_and_recovery_bounds() -> None:
    assert "OTEL_EXPORTER_OTLP_ENDPOINT" not in tracing_sink.tracing_env(False, "http://x")
    assert tracing_sink.tracing_env(True, "http://x")["OTEL_EXPORTER_OTLP_ENDPOINT"] == "http://x"
    assert tracing_sink.tracing_env(True, "http://x")["OTEL_TRACES_SAMPLER"] == "always_on"
    sampled = tracing_sink.tracing_env(True, "http://x", 0.25)
    assert (sampled["OTEL_TRACES_SAMPLER"], sampled["OTEL_TRACES_SAMPLER_ARG"]) == (
        "traceidratio",
        "0.25",
    )
    bounds = {d.step: d for d in extras.recovery_defaults(Settings())}
    # lease + 1 s margin + one recovery interval at worst; 2/3 lease + 1 s at best
    assert bounds["router"].latest_s == pytest.approx(60 + 1 + 10)
    assert bounds["router"].earliest_s == pytest.approx(40 + 1)
    assert bounds["parser"].latest_s == pytest.approx(120 + 1 + 10)


def test_two_process_bound_is_what_the_shared_cores_allow(monkeypatch: Any) -> None:
    """The eighth round's figures: w = 49.5, r = 37.6 µs on 2 cores allow 1.14x; the
    batched protocol's (72.9, 10.5) 1.75x; 2x at most however idle the server."""
    from types import SimpleNamespace

    from saga.bench import targets

    def system(w: float, r: float) -> Any:
        return SimpleNamespace(
            workers=SimpleNamespace(cpu_us_per_transition=w),
            redis=SimpleNamespace(server_cpu_us_per_transition=r),
        )

    monkeypatch.setattr(targets.os, "cpu_count", lambda: 2)
    assert "at most 1.14x on 2 cores" in targets._two_process_bound(system(49.5, 37.6))
    assert "at most 1.75x" in targets._two_process_bound(system(72.9, 10.5))
    monkeypatch.setattr(targets.os, "cpu_count", lambda: 16)
    assert "at most 2.00x" in targets._two_process_bound(system(49.5, 1.0))
    assert targets._two_process_bound(system(0.0, 1.0)) == "bound unknown"
