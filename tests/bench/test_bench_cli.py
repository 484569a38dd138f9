"""``saga bench`` end to end on a tiny N: it runs, cleans up, and its JSON has every
field. No timing assertions: figures from a test machine mean nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import msgspec
import pytest

from saga.bench.report import Report
from saga.state.connection import connect

pytestmark = pytest.mark.anyio

SAGAS = 50


def bench(redis_url: str, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "REDIS_URL": redis_url, "SAGA_LOG_FORMAT": "json"}
    for key in ("SAGA_KEY_PREFIX", "SAGA_PIPELINE", "OTEL_EXPORTER_OTLP_ENDPOINT"):
        env.pop(key, None)
    return subprocess.run(
        [sys.executable, "-m", "saga.cli.main", "bench", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def field_names(struct: type[msgspec.Struct]) -> set[str]:
    return {f.encode_name for f in msgspec.structs.fields(struct)}


@pytest.fixture(scope="module")
def report_json(redis_server: Any) -> dict[str, Any]:
    done = bench(
        redis_server.url,
        "--sagas", str(SAGAS), "--workers", "1", "--concurrency", "8",
        "--rate-seconds", "1", "--cli-runs", "1", "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    data: dict[str, Any] = json.loads(done.stdout)
    return data


def test_json_is_a_complete_report(report_json: dict[str, Any]) -> None:
    report = msgspec.convert(report_json, Report)  # strict: every required field, right types
    assert set(report_json) == field_names(Report)
    assert set(report.systems) == {"saga", "seed", "batched", "minimal"}
    assert report.scenario == "default"
    for name, result in report.systems.items():
        raw = report_json["systems"][name]
        assert result.sagas == SAGAS and result.transitions == 3 * SAGAS
        assert result.throughput.transitions_per_s > 0
        assert result.throughput.e2e_ms.n == SAGAS
        assert result.throughput.handoff_ms.n == 2 * SAGAS
        assert result.latency is not None and result.latency.sagas >= 1
        # The paced workers' own CPU, so "half of the maximum" can be read as load.
        assert result.latency.worker_cpu_us_per_transition > 0
        assert 0 < result.latency.worker_cores_busy <= report.machine.nproc
        assert result.latency.round_trips_per_transition > 0
        assert result.redis.round_trips_per_transition > 0
        assert result.redis.commands_per_transition > 0
        # the whole life adds the start: more than the backlog phase alone
        assert result.redis.life_commands_per_transition > result.redis.commands_per_transition
        assert result.redis.life_server_cpu_us_per_transition > 0
        assert result.redis.command_us and all(v > 0 for v in result.redis.command_us.values())
        assert result.workers.processes == 1 and result.workers.peak_rss_bytes > 0
        assert result.memory.sample_keys
        # where the bytes are: the keys of a record by kind, and what no key holds
        assert "overhead" in result.memory.by_kind_per_saga
        assert len(result.memory.by_kind_per_saga) > 1
        for part in ("throughput", "latency", "redis", "memory", "workers"):
            assert raw[part] is not None, (name, part)
    assert report.vs_seed is not None and report.vs_minimal is not None
    assert report.vs_batched is not None
    saga_kinds = report.systems["saga"].memory.by_kind_per_saga
    assert saga_kinds["saga"] > 0 and saga_kinds["hist"] > 0  # each record's hash and history
    assert report.cold_start is not None and report.cold_start.runs == 1
    assert report.recovery is not None and report.recovery.measured_reclaim_s > 0
    assert {d.step for d in report.recovery.defaults} == {"router", "parser", "grouper"}
    assert report.retention is not None and report.retention.expiry is not None
    assert report.tracing.requested is False
    assert {t.name for t in report.targets} >= {
        "throughput vs seed",
        "throughput vs batched seed",
        "server CPU",
        "commands",
        "worker CPU",
        "round trips",
        "throughput vs minimal",
        "hand-off p50",
        "hand-off p99",
        "memory per saga",
        "retention",
        "linear cost",
    }
    assert report.machine.nproc >= 1 and report.server.version


def test_json_is_valid_under_its_shipped_schema(report_json: dict[str, Any]) -> None:
    """saga bench --json validates against saga/cli/schemas/bench.json (docs/json.md)."""
    from tests.cli.test_json_shapes import validate

    validate("bench", report_json)


def test_seed_protocol_costs_its_round_trips(report_json: dict[str, Any]) -> None:
    """7 round trips per step, 6 on the last: (7 + 7 + 6) / 3 plus idle reads."""
    seed = report_json["systems"]["seed"]["redis"]
    assert seed["round_trips_per_transition"] >= 20 / 3
    assert seed["round_trips"]["XREADGROUP"] >= 1
    for command in ("SET", "GET", "XADD", "XACK", "DEL"):
        assert seed["round_trips"][command] > 0
    assert report_json["systems"]["minimal"]["redis"]["round_trips"].get("EVALSHA", 0) == 0


def test_batched_seed_protocol_reads_ten_and_pipelines_the_rest(
    report_json: dict[str, Any],
) -> None:
    """Batched x10: its lock, marker and commit commands travel in pipelines, never alone,
    and it runs the same commands on the server as the seed as written."""
    batched = report_json["systems"]["batched"]["redis"]
    assert set(batched["round_trips"]) <= {"XREADGROUP", "pipeline", "HELLO", "CLIENT", "PING"}
    assert batched["round_trips"]["pipeline"] > 0
    # three round trips per batch of up to ten messages, plus idle reads
    assert batched["round_trips_per_transition"] < 3.5
    for command in ("set", "get", "xadd", "xack", "del"):
        assert batched["commands"][command] > 0, command


def test_a_run_leaves_no_keys(report_json: dict[str, Any], redis_server: Any) -> None:
    import anyio

    async def leftovers() -> list[Any]:
        client = connect(redis_server.url)
        try:
            return [k async for k in client.scan_iter(match="bench-*", count=1000)]
        finally:
            await client.aclose()

    assert anyio.run(leftovers) == []


def test_human_output_and_usage_errors(redis_server: Any) -> None:
    done = bench(
        redis_server.url,
        "--sagas", "20", "--only", "minimal", "--rate", "0",
        "--cli-runs", "0", "--no-recovery", "--no-retention-check",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "transitions/s" in done.stdout and "minimal" in done.stdout
    bad = bench(redis_server.url, "--sagas", "0")
    assert bad.returncode == 2
    bad = bench(redis_server.url, "--rate", "-1", "--sagas", "5")
    assert bad.returncode == 2 and "--rate" in bad.stderr
    for ratio in ("0", "1.5", "half"):
        bad = bench(redis_server.url, "--trace-ratio", ratio, "--sagas", "5")
        assert bad.returncode == 2 and "--trace-ratio" in bad.stderr, bad.stderr


def test_pages_take_the_document_pipelines_path(redis_server: Any) -> None:
    """With --page-bytes the router stores pages, the parser loads them (a parser
    without them fails, and the run would not finish) and deletes them."""
    done = bench(
        redis_server.url,
        "--sagas", "30", "--only", "saga", "--page-bytes", "5000", "--rate", "0",
        "--cli-runs", "0", "--no-recovery", "--no-retention-check", "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    report = msgspec.json.decode(done.stdout, type=Report)
    assert report.params.page_bytes == 5000
    saga = report.systems["saga"]
    per_transition = saga.redis.commands
    for command in ("set", "get", "del"):  # one of each per saga: a third per transition
        assert per_transition.get(command, 0) >= 1 / 3 - 0.01, (command, per_transition)
    assert saga.memory.sample_keys["pages"] == 0  # deleted by the parser's commit
    assert "--page-bytes 5000" in report.command


def test_page_bytes_out_of_bounds_is_a_usage_error(redis_server: Any) -> None:
    bad = bench(redis_server.url, "--page-bytes", "-1", "--sagas", "5")
    assert bad.returncode == 2 and "--page-bytes must be >= 0" in bad.stderr
    bad = bench(redis_server.url, "--page-bytes", "100000", "--sagas", "100000")
    assert bad.returncode == 2 and "MiB of pages in Redis at once" in bad.stderr, bad.stderr


def test_features_prints_a_cost_for_every_feature_as_json(redis_url: str) -> None:
    out = bench(redis_url, "--features", "200", "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["calls"] == 200
    names = {(r["side"], r["feature"]) for r in doc["features"]}
    for side, word in (("worker", "log line"), ("worker", "metrics"), ("worker", "tracing"),
                       ("worker", "OTLP encoding per span (saga's)"),
                       ("worker", "OTLP encoding per span (SDK's)"),
                       ("server", "history event"), ("server", "state index"),
                       ("server", "map of 100 items: Redis commands per item"),
                       ("server", "plain chain: Redis commands per transition")):  # fmt: skip
        assert any(s == side and word in n for s, n in names), (side, word)
    assert all(isinstance(r["us_per_call"], float) for r in doc["features"])
    counts = {r["feature"]: r["us_per_call"] for r in doc["features"] if r["unit"] == "commands"}
    chain = counts["plain chain: Redis commands per transition (a count)"]
    assert chain == 8.1  # as on main (docs/benchmarks.md, maps): a map costs a chain nothing
    assert 0 < counts["map of 100 items: Redis commands per item (a count)"] < 20


def test_features_refuses_a_count_below_one(redis_url: str) -> None:
    out = bench(redis_url, "--features", "0")
    assert out.returncode == 2
    assert "--features needs a positive number" in out.stderr
