"""What every bench worker process shares: a round-trip counter, a start barrier and
a usage report.

Round trips are counted on the client, where they happen: every write of a request
to a Redis socket is one (``send_packed_command``). A single command is one write;
a whole pipeline is one write too, however many commands it carries. Single
commands are also counted by name, so a report can say which calls the round
trips were.

The barrier: a worker imports everything and wires itself first (the saga worker:
settings, logging, its Redis client, scripts and consumer groups, up to the
``on_ready`` of ``saga.worker.service.serve``; a reference worker: its client,
connected), prints ``ready`` and waits for a line on stdin. The driver starts the
clock when it sends that line to every worker at once, so start-up (about a second
of imports and ~0.1 s of wiring for the saga CLI) never counts as throughput, and
no worker starts before the others.

Run the saga worker CLI through it::

    python -m saga.bench.harness --stats out.json -- worker router parser grouper
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import os
import resource
import sys
from collections import Counter
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path
from typing import Any

import msgspec

from saga.config.settings import load_settings
from saga.worker.gc_tuning import settle


class Usage(msgspec.Struct, frozen=True, kw_only=True):
    """What one worker process reports when it exits."""

    pid: int
    round_trips: int
    """Socket writes: single commands plus whole pipelines."""
    single_commands: dict[str, int]
    """Commands sent on their own (each one round trip), by name."""
    cpu_s: float
    """User + system CPU seconds from the go signal to exit."""
    peak_rss_bytes: int
    """Peak resident memory of the process over its life (ru_maxrss)."""


class RoundTrips:
    """Counts socket writes of every redis-py asyncio connection in this process."""

    def __init__(self) -> None:
        self.writes = 0
        self.singles: Counter[str] = Counter()
        self._saved: tuple[Any, Any] | None = None

    def install(self) -> None:
        """Count from now on, in every connection of this process (undo: ``uninstall``)."""
        from redis.asyncio.connection import AbstractConnection

        meter = self
        send_packed = AbstractConnection.send_packed_command
        send_command = AbstractConnection.send_command
        self._saved = (send_packed, send_command)

        async def counted_packed(conn: Any, command: Any, check_health: bool = True) -> None:
            meter.writes += 1
            await send_packed(conn, command, check_health)

        async def counted_command(conn: Any, *args: Any, **kwargs: Any) -> None:
            name = args[0] if args else b"?"
            meter.singles[name.decode() if isinstance(name, bytes) else str(name).upper()] += 1
            await send_command(conn, *args, **kwargs)

        AbstractConnection.send_packed_command = counted_packed  # type: ignore[method-assign,assignment]
        AbstractConnection.send_command = counted_command  # type: ignore[method-assign,assignment]

    def uninstall(self) -> None:
        from redis.asyncio.connection import AbstractConnection

        if self._saved is not None:
            send_packed, send_command = self._saved
            AbstractConnection.send_packed_command = send_packed  # type: ignore[method-assign]
            AbstractConnection.send_command = send_command  # type: ignore[method-assign]
            self._saved = None


def _cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


class Harness:
    """Counter + barrier + report for one worker process."""

    def __init__(self, stats_path: str | None) -> None:
        self.stats_path = stats_path
        self.trips = RoundTrips()
        self.trips.install()
        self._cpu_at_go = _cpu()

    def wait_for_go(self) -> None:
        """Tell the driver we are ready, then block until it says go (a line on stdin)."""
        sys.stdout.write("ready\n")
        sys.stdout.flush()
        line = sys.stdin.readline()
        if not line:  # the driver went away
            raise SystemExit(1)
        self._cpu_at_go = _cpu()

    def usage(self) -> Usage:
        return Usage(
            pid=os.getpid(),
            round_trips=self.trips.writes,
            single_commands=dict(self.trips.singles),
            cpu_s=round(_cpu() - self._cpu_at_go, 4),
            peak_rss_bytes=peak_rss(),
        )

    def report(self) -> None:
        if self.stats_path:
            Path(self.stats_path).write_bytes(msgspec.json.encode(self.usage()))


def reference_main(
    prog: str,
    serve: Callable[[str, str, int, int, Callable[[], None]], Coroutine[Any, Any, None]],
    argv: Sequence[str] | None,
    concurrency_help: str,
) -> int:
    """The command line of a reference worker (seed protocol, minimal floor): parse the
    options, connect, wait for the driver's go, serve until stopped, write the usage
    report."""
    p = argparse.ArgumentParser(prog=prog)
    p.add_argument("--url", required=True)
    p.add_argument("--prefix", required=True)
    p.add_argument("--concurrency", type=int, default=8, help=concurrency_help)
    p.add_argument("--block-ms", type=int, default=1000)
    p.add_argument("--stats", help="write the usage report (JSON) here at exit")
    args = p.parse_args(argv)
    harness = Harness(args.stats)
    # The same collector settings as a saga worker: the references run the same runtime.
    settle(load_settings().gc_threshold)
    try:
        asyncio.run(
            serve(args.url, args.prefix, args.concurrency, args.block_ms, harness.wait_for_go)
        )
    finally:
        harness.report()
    return 0


def peak_rss() -> int:
    """Peak resident memory of this process image. Linux: VmHWM, which starts afresh at
    exec (ru_maxrss keeps the forking parent's peak across exec: a small worker started
    by a big driver would report the driver's). Elsewhere: ru_maxrss."""
    with contextlib.suppress(OSError, ValueError), open("/proc/self/status", "rb") as f:
        for line in f:
            if line.startswith(b"VmHWM:"):
                return int(line.split()[1]) * 1024
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss if sys.platform == "darwin" else rss * 1024  # macOS: bytes, Linux: KiB


async def serve_until_stopped(tasks: list[asyncio.Task[None]], stop: asyncio.Event) -> None:
    """Run a reference worker's tasks until ``stop`` (SIGTERM) or one of them fails;
    then cancel them and give them a few seconds (a client library that swallows a
    cancellation must not keep the process, and its report, from ending)."""
    waiter = asyncio.create_task(stop.wait())
    await asyncio.wait([waiter, *tasks], return_when=asyncio.FIRST_COMPLETED)
    stop.set()
    for t in tasks:
        t.cancel()
    done, _ = await asyncio.wait(tasks, timeout=5.0)
    waiter.cancel()
    for t in done:
        if not t.cancelled() and t.exception() is not None:
            raise t.exception()  # type: ignore[misc]


# Modules the saga worker imports on its way to its first XREADGROUP: loaded before
# the barrier so the clock measures the engine, not Python's import system.
_SAGA_WORKER_IMPORTS = (
    "saga.cli.main",
    "saga.cli.cmd_worker",
    "saga.wiring.logs",
    "saga.config.settings",
    "saga.wiring.runtime",
    "saga.wiring.ports",
    "saga.adapters.llm",
    "saga.worker.service",
    "saga.worker.executor",
    "saga.bench.pipelines",
    "saga.telemetry.worker",
)
_TRACING_IMPORTS = (
    "opentelemetry.sdk.trace",
    "opentelemetry.sdk.trace.export",
    "opentelemetry.sdk.resources",
    "opentelemetry.exporter.otlp.proto.http.trace_exporter",
)


def _go_at_ready(harness: Harness) -> None:
    """Hold the saga worker at its ``on_ready`` (wired, scripts and groups in place,
    the collector settled) until the driver says go. Blocking the event loop there is
    fine: nothing has started yet."""
    from saga.worker import service

    serve = service.serve

    async def serve_after_go(
        *args: Any, on_ready: Callable[[], None] | None = None, **kw: Any
    ) -> None:
        def ready() -> None:
            if on_ready is not None:
                on_ready()
            harness.wait_for_go()

        await serve(*args, on_ready=ready, **kw)

    service.serve = serve_after_go  # type: ignore[assignment]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m saga.bench.harness")
    parser.add_argument("--stats", help="write the usage report (JSON) here at exit")
    parser.add_argument("saga_args", nargs=argparse.REMAINDER, help="-- then saga CLI args")
    args = parser.parse_args(argv)
    rest = list(args.saga_args)
    saga_args = rest[1:] if rest[:1] == ["--"] else rest
    harness = Harness(args.stats)
    for name in _SAGA_WORKER_IMPORTS:
        importlib.import_module(name)
    if os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
        for name in _TRACING_IMPORTS:
            with contextlib.suppress(ImportError):
                importlib.import_module(name)
    from saga.cli.main import main as saga_main

    _go_at_ready(harness)
    try:
        return saga_main(saga_args)
    finally:
        harness.report()


if __name__ == "__main__":
    sys.exit(main())
