"""A controller process: client, controller, metrics for every step of every saga type,
health server, signals — wired from settings (what ``saga controller`` runs)."""

from __future__ import annotations

import signal

import anyio
import structlog

from saga.api.pipeline import Pipeline
from saga.config.settings import Settings
from saga.controller.controller import Controller
from saga.controller.metrics import ControllerCounters
from saga.state.keys import Keys
from saga.telemetry.snapshot import REFRESH_S
from saga.worker.health import HealthState, bound_port, listen, serve_listener
from saga.worker.naming import worker_name

log = structlog.get_logger("saga.controller")


async def serve(settings: Settings, pipeline: Pipeline, *, health_port: int | None = None) -> None:
    """Run the controller until SIGTERM/SIGINT, then finish the passes under way."""
    from saga.telemetry.metrics import Metrics
    from saga.wiring.runtime import keys_of, open_client

    client = open_client(settings)
    keys = keys_of(settings, pipeline.name)  # this deployment's type; the others it finds
    health = HealthState()
    controller = Controller(
        client=client,
        keys=keys,
        settings=settings,
        specs=pipeline.steps,
        name=f"controller-{worker_name()}",
        health=health,
    )
    controller.pipeline = pipeline
    metrics = Metrics(by_user=settings.metrics_by_user)
    metrics.registry.register(ControllerCounters(controller))
    breakers = settings.breakers()
    listener = await listen(settings, health_port)  # HealthPortError before anything starts
    try:
        async with anyio.create_task_group() as tg:
            if listener is not None:
                tg.start_soon(serve_listener, health, listener, metrics.render)
                log.info("health_listening", port=bound_port(listener))
                refresh = metrics.snapshot.refresh_loop
                tg.start_soon(refresh, client, lambda: _read(controller), breakers, REFRESH_S)
            await run_with_signals(controller)
            tg.cancel_scope.cancel()
    finally:
        metrics.shutdown()
        await client.aclose()


def _read(controller: Controller) -> list[tuple[Keys, tuple[str, ...]]]:
    """What the gauges read: every type the controller serves, and its steps."""
    return [(w.keys, w.steps) for w in controller.types.values()]


async def run_with_signals(controller: Controller) -> None:
    """Run ``controller`` until SIGTERM or SIGINT asks it to drain."""
    async with anyio.create_task_group() as tg:

        async def watch() -> None:
            with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                async for _ in signals:
                    controller.stop()

        tg.start_soon(watch)
        await controller.run()
        tg.cancel_scope.cancel()
