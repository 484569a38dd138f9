"""What the bench measures besides throughput: CLI cold start, recovery of a killed
worker's step, retention of finished sagas; and the workers' base environment.
(Tracing's sink and environment: ``saga.bench.tracing_sink``.)"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import anyio

from saga.bench.measure import server_time_ms, settle_memory
from saga.bench.procs import WorkerSet
from saga.bench.report import ColdStart, Expiry, Recovery, Retention, StepRecovery
from saga.bench.systems import STEPS, SagaSystem, acked
from saga.config.settings import Settings
from saga.state.keys import GROUP, Keys
from saga.state.machine import StateMachine
from saga.state.model import EventType, SagaState
from saga.state.reads import get_saga_and_history
from saga.state.replies import text

IDLE_MARGIN_S = 1.0
"""The executor takes over an entry idle for lease + 1 s (see Executor._recover_once)."""


# -- CLI cold start -----------------------------------------------------------------------
def saga_command() -> list[str]:
    script = Path(sys.executable).with_name("saga")
    return [str(script)] if script.exists() else [sys.executable, "-m", "saga.cli.main"]


def _median_ms(argv: list[str], env: dict[str, str], runs: int) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        done = subprocess.run(argv, env=env, capture_output=True, check=False, timeout=120)
        times.append((time.perf_counter() - t0) * 1000)
        if done.returncode != 0:
            raise RuntimeError(
                f"`{' '.join(argv[-4:])}` failed ({done.returncode}): "
                f"{done.stderr.decode(errors='replace')[-500:]}"
            )
    return round(statistics.median(times), 1)


def cold_start(env: dict[str, str], record_id: str, runs: int) -> ColdStart:
    """Wall time of fresh CLI processes reading the bench's own sagas (median of runs)."""
    saga = saga_command()
    return ColdStart(
        runs=runs,
        show_json_ms=_median_ms([*saga, "show", "--json", record_id], env, runs),
        top_once_json_ms=_median_ms([*saga, "top", "--once", "--json"], env, runs),
        top_once_json_interval0_ms=_median_ms(
            [*saga, "top", "--once", "--json", "--interval", "0"], env, runs
        ),
    )


# -- retention ---------------------------------------------------------------------------
async def retention(client: Any, keys: Keys, record_id: str, setting_s: int) -> Retention:
    """When a finished saga is deleted: the end of its retention ('ret', which the sweep
    reads) and its due time in the partition's retired set (which the sweep walks)."""
    secs, micros = await client.time()
    now_ms = secs * 1000 + micros // 1000
    ret, uid = await client.hmget(keys.saga(record_id), ["ret", "uid"])
    member = f"{text(uid or b'')}|{record_id}"
    due = await client.zscore(keys.retired(keys.partition_of(record_id)), member)
    saga_in = (int(ret) - now_ms) // 1000 if ret else -1
    listed_in = (int(due) - now_ms) // 1000 if due is not None else -1
    ok = 0 < saga_in <= setting_s and 0 < listed_in <= setting_s
    return Retention(setting_s=setting_s, saga_ttl_s=saga_in, history_ttl_s=listed_in, ok=ok)


async def _count_keys(client: Any, prefix: str) -> dict[str, int]:
    """Keys under ``prefix`` by kind (the part after the partition tag)."""
    kinds: Counter[str] = Counter()
    cursor: Any = 0
    while True:
        cursor, found = await client.scan(cursor, match=f"{prefix}*", count=1000)
        for raw in found:
            key = raw.decode() if isinstance(raw, bytes) else str(raw)
            rest = key.split("}:", 1)[1] if "}:" in key else key[len(prefix) :].lstrip(":")
            parts = rest.split(":")
            kinds[":".join(parts[:2]) if parts[0] == "idx" else parts[0]] += 1
        if int(cursor) == 0:
            return dict(sorted(kinds.items()))


async def _index_entries(client: Any, keys: Keys) -> dict[str, int]:
    out = {"created": 0, "completed": 0, "user": 0}
    for p in keys.all_partitions():
        out["created"] += int(await client.zcard(keys.created_index(p)))
        out["completed"] += int(await client.zcard(keys.state_index(p, SagaState.COMPLETED)))
        cursor: Any = 0
        while True:
            cursor, found = await client.scan(
                cursor, match=keys.user_index(p, "x")[:-1] + "*", count=1000
            )
            for key in found:
                out["user"] += int(await client.zcard(key))
            if int(cursor) == 0:
                break
    return out


async def expiry(
    client: Any,
    url: str,
    prefix: str,
    base_env: dict[str, str],
    log_dir: Path,
    sagas: int = 200,
    retention_s: int = 2,
) -> Expiry:
    """Run two waves of sagas with a retention of ``retention_s``: what the first leaves
    behind once expired, and whether the indexes are pruned (the maintenance sweep)."""
    system = SagaSystem(prefix, 1, {})
    env = {
        **base_env,
        **system.worker_env(),
        "SAGA_RETENTION_DAYS": repr((retention_s + 0.5) / 86400),
    }
    await system.prepare(client)
    mem0 = await settle_memory(client)

    async def wave(tag: str) -> None:
        records = [(f"{tag}{i:05d}", f"u{i % 10:02d}") for i in range(sagas)]
        await system.submit(client, records)
        argv = system.worker_argv(url, 16, str(log_dir / f"exp-{tag}.stats.json"))
        with WorkerSet([argv], env, log_dir, f"exp-{tag}") as ws:
            await ws.start()
            ws.go()
            # Finished sagas counted on the last step's stream (acknowledged entries):
            # the completed index shrinks as commits prune expired sagas from it.
            want = sagas * (2 if tag == "b" else 1)
            last = system.keys.ready(0, STEPS[-1])
            with anyio.fail_after(120):
                while (await acked(client, last, GROUP))[0] < want:
                    ws.check()
                    await anyio.sleep(0.05)
            await ws.stop()
        await system.trim(client)

    # The maintenance loop (executors, controller) sweeps retired sagas once a minute;
    # run its pass now rather than wait for it.
    from saga.state.retention import prune_retired

    await wave("a")
    await anyio.sleep(retention_s + 1.5)
    await prune_retired(StateMachine(client, system.keys), 0)
    left = await _count_keys(client, prefix)
    mem1 = await settle_memory(client)
    await wave("b")
    await prune_retired(StateMachine(client, system.keys), 0)
    entries = await _index_entries(client, system.keys)
    per_saga = {k: v for k, v in left.items() if v >= sagas}
    bounded = not per_saga and all(v <= sagas * 1.2 for v in entries.values())
    return Expiry(
        sagas_per_wave=sagas,
        retention_s=retention_s,
        keys_left=left,
        bytes_left_per_saga=round((mem1 - mem0) / sagas, 1),
        index_entries_after_second_wave=entries,
        bounded=bounded,
    )


# -- recovery of a killed worker's step ------------------------------------------------------
def recovery_defaults(settings: Settings) -> list[StepRecovery]:
    """Per step of the document pipeline, with the effective settings."""
    from saga.wiring.runtime import document_pipeline

    out = []
    interval = settings.recovery_interval_s
    for spec in document_pipeline(settings).steps:
        out.append(
            StepRecovery(
                step=spec.name,
                lease_s=spec.lease_s,
                earliest_s=round(spec.lease_s * 2 / 3 + IDLE_MARGIN_S, 2),
                latest_s=round(spec.lease_s + IDLE_MARGIN_S + interval, 2),
            )
        )
    return out


async def recovery(
    client: Any,
    url: str,
    prefix: str,
    settings: Settings,
    base_env: dict[str, str],
    log_dir: Path,
    lease_s: float = 2.0,
    interval_s: float = 0.5,
) -> Recovery:
    """Kill (SIGKILL) a worker mid-step and time how long until another one takes the
    step over and finishes the saga, with the lease and recovery interval shrunk."""
    system = SagaSystem(prefix, 1, {})
    shrunk = {
        **base_env,
        "SAGA_KEY_PREFIX": prefix,
        "SAGA_PARTITIONS": "1",
        "SAGA_ROUTER_LEASE": str(lease_s),
        "SAGA_RECOVERY_INTERVAL": str(interval_s),
    }
    await system.prepare(client)
    sm = StateMachine(client, system.keys)
    rid = "recovery-1"
    stuck_env = {**shrunk, "SAGA_PIPELINE": "saga.bench.pipelines:stuck"}
    live_env = {**shrunk, "SAGA_PIPELINE": "saga.bench.pipelines:noop"}
    doomed = WorkerSet(
        [system.worker_argv(url, 1, str(log_dir / "rec-a.stats.json"))], stuck_env, log_dir, "rec-a"
    )
    rescuer = WorkerSet(
        [system.worker_argv(url, 1, str(log_dir / "rec-b.stats.json"))], live_env, log_dir, "rec-b"
    )
    with doomed, rescuer:
        await doomed.start()
        doomed.go()
        await sm.start(rid, "u-recovery", STEPS[0])
        with anyio.fail_after(30):
            while True:
                saga, _ = await get_saga_and_history(client, system.keys, rid)
                if saga.state == SagaState.RUNNING:
                    break
                doomed.check()
                await anyio.sleep(0.02)
        await rescuer.start()
        rescuer.go()
        await anyio.sleep(0.3)  # the rescuer is reading; the entry is still leased
        killed_ms = await server_time_ms(client)
        doomed.kill(0)
        latest = lease_s + IDLE_MARGIN_S + interval_s
        with anyio.fail_after(latest * 4 + 30):
            while True:
                saga, history = await get_saga_and_history(client, system.keys, rid)
                if saga.state == SagaState.COMPLETED:
                    break
                rescuer.check()
                await anyio.sleep(0.02)
        await rescuer.stop()
    reclaimed = next(e.at_ms for e in history if e.event == EventType.RECLAIMED)
    return Recovery(
        recovery_interval_s=settings.recovery_interval_s,
        idle_margin_s=IDLE_MARGIN_S,
        defaults=recovery_defaults(settings),
        measured_lease_s=lease_s,
        measured_interval_s=interval_s,
        measured_expected_s=[round(lease_s * 2 / 3 + IDLE_MARGIN_S, 2), round(latest, 2)],
        measured_reclaim_s=round((reclaimed - killed_ms) / 1000, 3),
        measured_complete_s=round((saga.updated_ms - killed_ms) / 1000, 3),
    )


def worker_base_env(redis_url: str, log_level: str, extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    for key in ("SAGA_PIPELINE", "SAGA_KEY_PREFIX", "SAGA_PARTITIONS", "SAGA_STEP"):
        env.pop(key, None)
    env.update(
        {
            "REDIS_URL": redis_url,
            "SAGA_LOG_LEVEL": log_level,
            "SAGA_LOG_FORMAT": "json",
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
            **extra,
        }
    )
    return env
