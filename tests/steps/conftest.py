"""Fixtures for the step tests: a real local HTTP server on 127.0.0.1, and a fetch
policy that lets a test read its own files and that server."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from saga.adapters.fetch_policy import FetchPolicy


def local_policy(*roots: object) -> FetchPolicy:
    """Files under ``roots``, any http URL, and loopback addresses (the test's server)."""
    return FetchPolicy(
        url_prefixes=("http://",), roots=tuple(str(r) for r in roots), networks=("127.0.0.0/8",)
    )


@dataclass
class Route:
    """What the server answers on one path."""

    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    stream_bytes: int = 0
    """Send this many bytes with no Content-Length (closing the connection ends the body)."""
    hang: bool = False
    """Answer nothing until the test ends (drives the client's read timeout)."""


class LocalServer:
    """A stdlib HTTP server on 127.0.0.1 (port 0) in a thread, answering from ``routes``."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        self.routes: dict[str, Route] = {}
        self.requests: list[str] = []
        self.release = threading.Event()
        self._server = ThreadingHTTPServer((host, 0), self._handler())
        self._server.daemon_threads = True
        # a short poll interval: shutdown() waits for the loop to look at its flag
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
        )

    @property
    def base(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def url(self, path: str) -> str:
        return f"{self.base}{path}"

    def add(self, path: str, route: Route) -> str:
        self.routes[path] = route
        return self.url(path)

    def redirect_chain(self, prefix: str, hops: int, target: str) -> str:
        """``prefix0 -> prefix1 -> ... -> target``: ``hops`` redirects; returns the first URL."""
        for hop in range(hops):
            nxt = target if hop == hops - 1 else f"{prefix}{hop + 1}"
            self.add(f"{prefix}{hop}", Route(302, headers={"Location": nxt}))
        return self.url(f"{prefix}0")

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                server.requests.append(self.path)
                route = server.routes.get(self.path.split("?")[0], Route(404, b"not here"))
                if route.hang:
                    server.release.wait(timeout=10)
                    return
                self.send_response(route.status)
                for name, value in route.headers.items():
                    self.send_header(name, value)
                if route.stream_bytes:
                    self.end_headers()
                    self._stream(route.stream_bytes)
                    return
                self.send_header("Content-Length", str(len(route.body)))
                self.end_headers()
                self.wfile.write(route.body)

            def _stream(self, total: int) -> None:
                chunk = b"x" * 16384
                try:
                    for _ in range(0, total, len(chunk)):
                        self.wfile.write(chunk)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client stopped reading: that is the point

            def log_message(self, format: str, *args: object) -> None:
                return None

        return Handler

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self.release.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


@pytest.fixture
def http_server() -> Iterator[LocalServer]:
    """A real HTTP server for this test, stopped at teardown."""
    server = LocalServer()
    server.start()
    yield server
    server.stop()
