"""The bench driver: runs each system the same way on the same server, then reports.

Per system, a backlog phase (throughput and cost) and a paced phase (latency), see
``saga.bench.phases``; then, for saga only, the CLI's cold start, retention and the
recovery of a killed worker. Every run uses its own key prefix and deletes its keys
at the end.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import msgspec

from saga.bench import extras, tracing_sink
from saga.bench.config import BenchConfig, BenchError, Progress
from saga.bench.measure import code_version, machine, server_info
from saga.bench.phases import cleanup
from saga.bench.report import (
    ColdStart,
    Params,
    Recovery,
    Report,
    Retention,
    SystemResult,
)
from saga.bench.system_run import run_system
from saga.bench.systems import BatchedSeedSystem, MinimalSystem, SagaSystem, SeedSystem, System
from saga.bench.targets import ratios, targets
from saga.config.settings import Settings
from saga.state.connection import connect


@contextlib.contextmanager
def _server(settings: Settings, private: bool) -> Any:
    """The URL to bench against: a private embedded server, or the configured one."""
    if private:
        from saga.adapters.embedded_redis import EmbeddedServer

        tmp = Path(tempfile.mkdtemp(prefix="saga-bench-server-"))
        server = EmbeddedServer(data_dir=tmp, tied=True, malloc=settings.embedded_malloc)
        server.start()
        try:
            yield server.url
        finally:
            server.stop()
            shutil.rmtree(tmp, ignore_errors=True)
    else:
        from saga.wiring.runtime import redis_url

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
        self.tenv = tracing_sink.tracing_env(cfg.tracing, endpoint, cfg.trace_ratio)
        self.env = extras.worker_base_env(url, cfg.log_level, {})
        self.results: dict[str, SystemResult] = {}
        self.retention: Retention | None = None
        self.cold: ColdStart | None = None
        self.recovery: Recovery | None = None

    def system(self, name: str) -> System:
        if name == "saga":
            return SagaSystem(
                f"{self.base}.saga", self.settings.partitions, self.tenv, self.cfg.page_bytes
            )
        if name == "seed":
            return SeedSystem(f"{self.base}.seed")
        if name == "batched":
            return BatchedSeedSystem(f"{self.base}.bat")
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
                await cleanup(self.client, f"{prefix}*")
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
                await cleanup(self.client, f"{prefix}*")

    async def close(self) -> None:
        with anyio.CancelScope(shield=True):
            await cleanup(self.client, f"{self.base}*")
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
    with _server(settings, cfg.private_server) as url, tracing_sink.otlp_sink() as (endpoint, sink):
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
    vs_bat = ratios(saga, results["batched"]) if saga and "batched" in results else None
    return Report(
        command=command,
        scenario=cfg.scenario,
        started_at=started_at,
        load_average=[round(load_start, 2), round(os.getloadavg()[0], 2)],
        code=code,
        params=_params(cfg, settings),
        machine=machine(),
        server=server,
        systems=results,
        vs_seed=vs_seed,
        vs_minimal=vs_min,
        vs_batched=vs_bat,
        targets=targets(results, vs_seed, vs_min, run.retention, vs_bat),
        cold_start=run.cold,
        recovery=run.recovery,
        retention=run.retention,
        tracing=tracing_sink.tracing_report(cfg.tracing, exports),
    )


def _params(cfg: BenchConfig, settings: Settings) -> Params:
    return Params(
        sagas=cfg.sagas,
        workers=cfg.workers,
        concurrency=cfg.concurrency,
        rate=cfg.rate,
        rate_seconds=cfg.rate_seconds,
        tracing=cfg.tracing,
        trace_ratio=cfg.trace_ratio,
        log_level=cfg.log_level,
        page_bytes=cfg.page_bytes,
        only=list(cfg.only),
        read_batch=settings.read_batch,
        partitions=settings.partitions,
    )
