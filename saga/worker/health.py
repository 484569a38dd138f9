"""Health of one executor, and the tiny HTTP server that reports it.

``/livez``: the loops are alive and not stuck (a Redis outage is not a reason
to restart a pod). ``/readyz``: Redis reachable, scripts loaded, groups present, heavy imports done.
``/metrics``: Prometheus text from the metrics hook.
"""

from __future__ import annotations

import errno
import time
from collections.abc import Callable
from typing import Any

import anyio
import structlog
from anyio.abc import SocketStream

from saga.config.settings import Settings

log = structlog.get_logger("saga.worker")


class HealthState:
    def __init__(self, stuck_after_s: float = 60.0) -> None:
        self.redis_ok = False
        self.scripts_loaded = False
        self.groups_present = False
        self.draining = False
        self.warming = False  # importing what the steps need (saga.worker.warmup)
        self.stuck_after_s = stuck_after_s
        self._ticks: dict[str, float] = {}
        self.last_error = ""

    def tick(self, loop: str) -> None:
        self._ticks[loop] = time.monotonic()

    def redis_down(self, exc: BaseException) -> None:
        name = type(exc).__name__
        if name == "ScriptsMissingError":  # an EVALSHA-only user: say what to run
            if self.last_error != name:
                log.warning("scripts_missing", error=name, detail=str(exc))
        elif self.redis_ok:
            log.warning("redis_unreachable", error=name)
        self.redis_ok = False
        self.last_error = name

    def redis_up(self) -> None:
        if not self.redis_ok and self.scripts_loaded:
            log.info("redis_reachable")
        self.redis_ok = True
        self.last_error = ""

    def live(self) -> tuple[bool, str]:
        now = time.monotonic()
        stale = [n for n, t in self._ticks.items() if now - t > self.stuck_after_s]
        return (not stale, f"stuck: {', '.join(stale)}" if stale else "ok")

    def ready(self) -> tuple[bool, str]:
        if self.draining:
            return False, "draining"
        if not self.redis_ok:
            return False, f"redis unreachable ({self.last_error or 'not connected yet'})"
        if not self.scripts_loaded:
            return False, "scripts not loaded"
        if not self.groups_present:
            return False, "consumer groups missing"
        if self.warming:
            return False, "warming up (importing what the steps need)"
        return True, "ok"


class HealthPortError(Exception):
    """The health server cannot listen where it was told to (one sentence for the operator)."""


DEFAULT_PORT = 8080


def health_port_of(base: int | None, index: int) -> int | None:
    """The health port of worker process ``index`` of ``saga worker --processes``:
    ``base + index``; 0 (any free port), -1 (none) and None (the default port + index,
    see ``bind_health``) are the same for every process."""
    if base is None or base <= 0:
        return base
    return base + index


async def bind_health(
    host: str, port: int | None, setting: str, default: int = DEFAULT_PORT
) -> Any:
    """A listener for the health server. ``port=None``: ``default``, or a free port
    when another process (a second worker on this host) holds it. An explicit port
    that cannot be bound raises HealthPortError naming it and ``setting``."""
    wanted = default if port is None else port
    try:
        return await anyio.create_tcp_listener(local_host=host, local_port=wanted, reuse_port=False)
    except OSError as exc:
        if port is not None or exc.errno != errno.EADDRINUSE:
            why = "is already in use" if exc.errno == errno.EADDRINUSE else f"({exc.strerror})"
            raise HealthPortError(
                f"the health server cannot listen on {host}:{wanted}: the port {why}; "
                f"set {setting} to another port (0 picks a free one)"
            ) from None
    listener = await anyio.create_tcp_listener(local_host=host, local_port=0, reuse_port=False)
    log.warning(
        "health_port_taken",
        wanted=wanted,
        port=listener.extra(anyio.abc.SocketAttribute.local_port),
        hint=f"another process holds {wanted}; set {setting} to choose the port",
    )
    return listener


async def listen(settings: Settings, override: int | None, index: int = 0) -> Any:
    """The health listener of a worker or controller (None for ``--health-port -1``):
    ``override`` is the command's ``--health-port``, else ``settings.health_port``;
    worker process ``index`` of ``--processes`` listens on that port + index."""
    host = settings.health_host
    if override is not None:
        if override < 0:
            return None
        return await bind_health(host, health_port_of(override, index), "--health-port")
    port = health_port_of(settings.health_port, index)
    return await bind_health(host, port, "SAGA_HEALTH_PORT", DEFAULT_PORT + index)


def bound_port(listener: Any) -> int:
    return int(listener.extra(anyio.abc.SocketAttribute.local_port))


async def serve_health(
    state: HealthState,
    port: int,
    metrics: Callable[[], str] | None = None,
    *,
    host: str = "127.0.0.1",
    task_status: anyio.abc.TaskStatus[int] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Serve until cancelled. ``port=0`` picks a free port (reported via task_status)."""
    listener = await anyio.create_tcp_listener(local_host=host, local_port=port, reuse_port=False)
    task_status.started(bound_port(listener))
    await serve_listener(state, listener, metrics)


async def serve_listener(
    state: HealthState, listener: Any, metrics: Callable[[], str] | None = None
) -> None:
    """Answer /livez, /readyz and /metrics on ``listener`` until cancelled."""

    async def handle(stream: SocketStream) -> None:
        async with stream:
            try:
                with anyio.fail_after(5):
                    request = await stream.receive(4096)
            except (TimeoutError, anyio.EndOfStream, anyio.BrokenResourceError):
                return
            path = request.split(b" ", 2)[1].decode("latin-1") if b" " in request else "/"
            code, body, ctype = _route(state, path.split("?")[0], metrics)
            head = f"HTTP/1.1 {code}\r\nContent-Type: {ctype}\r\n"
            head += f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
            try:
                await stream.send(head.encode() + body)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                return

    async with listener:
        await listener.serve(handle)


def _route(
    state: HealthState, path: str, metrics: Callable[[], str] | None
) -> tuple[str, bytes, str]:
    if path == "/livez":
        ok, why = state.live()
    elif path == "/readyz":
        ok, why = state.ready()
    elif path == "/metrics":
        text = metrics() if metrics else ""
        return "200 OK", text.encode(), "text/plain; version=0.0.4; charset=utf-8"
    else:
        return "404 Not Found", b"not found\n", "text/plain"
    return ("200 OK" if ok else "503 Service Unavailable"), (why + "\n").encode(), "text/plain"
