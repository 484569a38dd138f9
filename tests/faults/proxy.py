"""A small asyncio TCP proxy on loopback for network faults between workers and Redis.

It runs its own event loop in a thread. Faults act on replies (server to client), where
a command has already run but its caller cannot know: ``drop`` closes the connection
instead of forwarding a reply, ``delay`` holds a reply past the client's timeout, and
``reset()`` and ``blackhole`` cut or stall every connection. Randomness is seeded.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import socket
import struct
import threading
from collections import Counter
from dataclasses import dataclass, field


@dataclass
class Faults:
    drop: float = 0.0
    """Probability that a reply is dropped (the connection closed instead)."""
    delay: float = 0.0
    """Probability that a reply is held ``delay_s`` seconds."""
    delay_s: float = 0.0
    blackhole: bool = False
    """Nothing is forwarded while set (connections stall)."""


@dataclass
class Proxy:
    target_port: int
    seed: int = 0
    faults: Faults = field(default_factory=Faults)
    counts: Counter[str] = field(default_factory=Counter)
    port: int = 0

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)
        self._loop = asyncio.new_event_loop()
        self._writers: set[asyncio.StreamWriter] = set()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="fault-proxy", daemon=True)

    def start(self) -> Proxy:
        self._thread.start()
        self._ready.wait(10)
        return self

    def stop(self) -> None:
        self.reset()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)

    def reset(self) -> None:
        """Reset (RST) every open connection now."""
        self._loop.call_soon_threadsafe(self._reset_all)

    def _reset_all(self) -> None:
        for w in list(self._writers):
            self._abort(w)
        self.counts["reset"] += 1

    @staticmethod
    def _abort(w: asyncio.StreamWriter) -> None:
        sock = w.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        w.transport.abort()

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(asyncio.start_server(self._client, "127.0.0.1", 0))
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        self._loop.run_forever()
        server.close()

    async def _client(self, creader: asyncio.StreamReader, cwriter: asyncio.StreamWriter) -> None:
        try:
            sreader, swriter = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            self._abort(cwriter)
            return
        self._writers |= {cwriter, swriter}
        self.counts["connected"] += 1
        up = asyncio.ensure_future(self._pump(creader, swriter, replies=False))
        down = asyncio.ensure_future(self._pump(sreader, cwriter, replies=True))
        await asyncio.wait([up, down], return_when=asyncio.FIRST_COMPLETED)
        for task in (up, down):
            task.cancel()
        for w in (cwriter, swriter):
            self._writers.discard(w)
            self._abort(w)

    async def _pump(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *, replies: bool
    ) -> None:
        while True:
            chunk = await reader.read(65536)
            if not chunk:
                return
            while self.faults.blackhole:  # noqa: ASYNC110 - set from another thread
                await asyncio.sleep(0.05)
            f = self.faults
            if replies and f.drop and self._rng.random() < f.drop:
                self.counts["dropped"] += 1
                return  # the command ran; its reply never arrives
            if replies and f.delay and self._rng.random() < f.delay:
                self.counts["delayed"] += 1
                await asyncio.sleep(f.delay_s)
            writer.write(chunk)
            await writer.drain()
