"""A worker process: client, ports, executor, health server, signals — wired from settings."""

from __future__ import annotations

import signal
from collections.abc import Callable, Sequence
from dataclasses import replace

import anyio
import structlog

from saga.api.pipeline import Pipeline
from saga.config.settings import Settings
from saga.worker.executor import Executor
from saga.worker.health import HealthState, bound_port, listen, serve_listener
from saga.worker.naming import worker_name
from saga.worker.observer import Observer

log = structlog.get_logger("saga.worker")


async def serve(
    settings: Settings,
    steps: Sequence[str],
    *,
    pipeline: Pipeline | None = None,
    concurrency: int | None = None,
    health_port: int | None = None,
    health_index: int = 0,
    observer: Observer | None = None,
    metrics: Callable[[], str] | None = None,
    on_ready: Callable[[], None] | None = None,
) -> None:
    """Run an executor for ``steps`` until SIGTERM/SIGINT, then drain and return.

    ``health_port`` (the CLI's ``--health-port``) overrides ``settings.health_port``;
    -1 serves no health endpoints; ``health_index`` (worker process i of ``saga worker
    --processes``) adds i to the port. A port that cannot be bound raises HealthPortError
    before anything else starts. ``on_ready`` runs once the process is wired and warmed
    up and its scripts and consumer groups are in place, right before the first read
    (the CLI settles the garbage collector there; ``saga bench`` holds its workers there
    until it says go)."""
    from saga.telemetry.worker import WorkerTelemetry
    from saga.wiring.ports import DefaultPorts
    from saga.wiring.runtime import document_pipeline, keys_of, open_client

    pipeline = pipeline or document_pipeline(settings)
    if concurrency:
        pipeline = pipeline.with_overrides(lambda s: replace(s, concurrency=concurrency))
    for step in steps:
        pipeline.get(step)  # unknown step: a clear KeyError before anything starts
    listener = await listen(settings, health_port, health_index)
    address = f"{settings.health_host}:{bound_port(listener)}" if listener else ""
    client = open_client(settings)
    keys = keys_of(settings, pipeline.name)
    ports = DefaultPorts(settings, client, keys)
    health = HealthState()
    telemetry = WorkerTelemetry.start(settings, steps, pipeline.name)
    ports.budget_gate.on_hold = telemetry.metrics.budget.reserved
    executor = Executor(
        client=client,
        keys=keys,
        settings=settings,
        pipeline=pipeline,
        steps=steps,
        ports=ports,
        worker=worker_name(),
        observer=observer or telemetry.metrics.observer,
        health=health,
        on_ready=on_ready,
        health_address=address,
    )
    try:
        async with anyio.create_task_group() as tg:
            # Signals first: a SIGTERM while Redis is still unreachable stops the worker.
            tg.start_soon(_stop_on_signals, executor)
            if listener is not None:
                tg.start_soon(serve_listener, health, listener, metrics or telemetry.metrics.render)
                log.info("health_listening", port=bound_port(listener), address=address)
                tg.start_soon(telemetry.refresh_loop, client, keys)
            await executor.run()
            tg.cancel_scope.cancel()
    finally:
        telemetry.shutdown()
        await ports.aclose()
        await client.aclose()


async def _stop_on_signals(executor: Executor) -> None:
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for sig in signals:
            executor.stop(signal.Signals(sig).name)


async def run_with_signals(executor: Executor) -> None:
    """Run ``executor`` until SIGTERM or SIGINT asks it to drain (Kubernetes' stop)."""
    async with anyio.create_task_group() as tg:
        tg.start_soon(_stop_on_signals, executor)
        await executor.run()
        tg.cancel_scope.cancel()
