"""Two workers on one host: the default health port falls back to a free one (logged,
and published for `saga top`); an explicit port that is taken is one sentence, exit 2."""

from __future__ import annotations

import contextlib
import errno
import signal
import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest

from saga.state.keys import Keys
from saga.state.presence import live_workers
from tests.executor.conftest import SpawnWorker
from tests.executor.support import free_port, wait_until

pytestmark = pytest.mark.anyio


@contextlib.contextmanager
def held(port: int, host: str = "0.0.0.0", within: float = 180) -> Iterator[None]:
    """Hold ``port`` ourselves, as another process would (a first worker, say). While
    someone else holds it (a worker of a parallel test on the default 8080, which may let
    it go at any moment) keep trying until the deadline: only our own hold is known to
    last for the test."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    deadline = time.monotonic() + within
    try:
        while True:
            try:
                sock.bind((host, port))
                break
            except OSError as exc:
                if exc.errno != errno.EADDRINUSE:
                    raise
                if time.monotonic() > deadline:
                    pytest.fail(f"{host}:{port} stayed held by another process for {within:.0f} s")
                time.sleep(0.05)
        sock.listen(1)
        yield
    finally:
        sock.close()


async def test_second_worker_on_the_host_falls_back_to_a_free_port(
    spawn: SpawnWorker, redis: Any, keys: Keys
) -> None:
    """With 8080 taken and no SAGA_HEALTH_PORT, two workers both start, each on a free
    port it logs and publishes; both answer /readyz."""
    with held(8080):
        a, b = spawn(own_port=False), spawn(own_port=False)
        ports = {await a.learn_port(), await b.learn_port()}
    assert 8080 not in ports and len(ports) == 2
    for w in (a, b):
        await w.wait_ready()
        [taken] = w.logged("health_port_taken")
        assert taken["wanted"] == 8080 and taken["port"] == w.port
        assert taken["hint"] == (
            "another process holds 8080; set SAGA_HEALTH_PORT to choose the port"
        )  # not redacted
        assert "Traceback" not in w.log.read_text()

    async def published() -> bool:
        return {p.health for p in await live_workers(redis, keys)} == {
            f"127.0.0.1:{w.port}" for w in (a, b)
        }

    await wait_until(published, within=20, what="both health addresses in the presences")
    for w in (a, b):
        w.signal(signal.SIGTERM)
        assert await w.wait_exit(within=20) == 0


async def test_an_explicit_port_in_use_is_one_sentence_and_exit_2(spawn: SpawnWorker) -> None:
    """SAGA_HEALTH_PORT set to a port in use: exit 2, one line naming the port and setting."""
    port = free_port()
    with held(port, "127.0.0.1"):
        w = spawn(own_port=False, SAGA_HEALTH_PORT=str(port))
        assert await w.wait_exit(within=30) == 2
    out = w.log.read_text().strip()
    assert "Traceback" not in out and len(out.splitlines()) == 1, out
    assert f"127.0.0.1:{port}" in out and "SAGA_HEALTH_PORT" in out and "in use" in out


def _connects(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=5):
            return True
    except OSError:
        return False


async def test_health_host_is_the_bind_address(spawn: SpawnWorker) -> None:
    """By default only loopback's 127.0.0.1 answers; SAGA_HEALTH_HOST=0.0.0.0 (what the
    chart sets for the kubelet's probes) answers on every address, 127.0.0.2 included."""
    default, everywhere = spawn(), spawn(SAGA_HEALTH_HOST="0.0.0.0")
    for w in (default, everywhere):
        await w.wait_ready()
    assert not _connects("127.0.0.2", default.port)
    assert _connects("127.0.0.2", everywhere.port)
