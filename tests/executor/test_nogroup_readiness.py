"""/readyz while a ready stream's consumer group is missing: a real worker process reaches
Redis through a loopback proxy that stalls every connection right after forwarding a
NOGROUP reply, so the worker cannot recreate the group until the test lets it."""

from __future__ import annotations

import asyncio
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from saga.adapters.embedded_redis import EmbeddedServer
from saga.api.client import SagaClient
from saga.config.settings import Settings
from saga.state.connection import connect
from saga.state.keys import GROUP, Keys
from tests.executor import pipelines
from tests.executor.conftest import SpawnWorker
from tests.executor.support import free_port, wait_completed, wait_until
from tests.faults.proxy import Proxy

pytestmark = pytest.mark.anyio


class HoldAfterNogroup(Proxy):
    """Once armed, forwards everything until a reply carrying NOGROUP has been forwarded,
    then stalls every connection (``faults.blackhole``) until the test clears it. Once:
    NOGROUP replies held meanwhile (another loop's) pass when released."""

    armed = False

    async def _pump(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *, replies: bool
    ) -> None:
        while True:
            chunk = await reader.read(65536)
            if not chunk:
                return
            while self.faults.blackhole:  # noqa: ASYNC110 - cleared from another thread
                await asyncio.sleep(0.02)
            writer.write(chunk)
            await writer.drain()
            if replies and self.armed and b"NOGROUP" in chunk and not self.counts["held"]:
                self.faults.blackhole = True
                self.counts["held"] += 1


@pytest.fixture
def tcp_server(tmp_path: Path) -> Iterator[EmbeddedServer]:
    """A server of this test's own on a TCP port (the proxy speaks TCP)."""
    server = EmbeddedServer(data_dir=tmp_path / "tcp-redis", port=free_port(), tied=True)
    server.start()
    yield server
    server.stop()


@pytest.fixture
async def direct(tcp_server: EmbeddedServer) -> AsyncIterator[Any]:
    """The test's own client, straight to the server (never held by the proxy)."""
    client = connect(tcp_server.url)
    yield client
    await client.aclose()


def readyz(port: int) -> tuple[int, str]:
    """Status code and body of GET /readyz; (0, "") when nothing answers."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as r:
            return int(r.status), r.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
    except OSError:
        return 0, ""


async def test_readyz_fails_while_a_consumer_group_is_missing(
    spawn: SpawnWorker, tcp_server: EmbeddedServer, direct: Any, keys: Keys
) -> None:
    """XGROUP DESTROY under a worker: once it has read NOGROUP, /readyz answers 503
    "consumer groups missing" for as long as the group is gone; when the worker can reach
    Redis again it recreates the group, is ready again, and new sagas complete."""
    assert tcp_server.port
    proxy = HoldAfterNogroup(target_port=tcp_server.port).start()
    try:
        w = spawn(REDIS_URL=f"redis://127.0.0.1:{proxy.port}/0")
        await w.wait_ready()
        sagas = SagaClient(direct, keys, pipelines.pipeline(), Settings())
        await sagas.start("before-destroy", "u1")
        await wait_completed(direct, keys, "before-destroy")
        stream = keys.ready(0, "router")
        proxy.armed = True
        await direct.xgroup_destroy(stream, GROUP)

        async def not_ready() -> bool:
            return await anyio.to_thread.run_sync(readyz, w.port) == (
                503,
                "consumer groups missing\n",
            )

        # Within the client's 10 s socket timeout, after which the stall reads as Redis down.
        await wait_until(not_ready, within=8, what="/readyz to say the groups are missing")
        assert proxy.counts["held"] == 1
        assert await direct.xinfo_groups(stream) == []  # held: the worker cannot recreate it
        assert w.alive(), w.tail()
        await sagas.start("after-destroy", "u1")  # enqueued while the group is missing
        proxy.faults.blackhole = False
        await w.wait_ready()
        await wait_completed(direct, keys, "after-destroy", within=30)
        groups = await direct.xinfo_groups(stream)
        assert [g["name"] for g in groups] == [GROUP.encode()]
        assert w.logged("consumer_group_missing") and w.logged("consumer_groups_recreated")
    finally:
        proxy.faults.blackhole = False
        proxy.stop()
