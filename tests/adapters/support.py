"""Test support: a real HTTP server answering from a script, and a deadline wait.

The server (127.0.0.1, port 0, a thread) stands in for the billing service and
for an OpenAI-compatible provider; it records every request so tests can count
calls and read the headers each one carried.
"""

from __future__ import annotations

import json
import re
import socket
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import anyio


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: Any

    @property
    def bearer(self) -> str:
        return self.headers.get("authorization", "").removeprefix("Bearer ")


@dataclass(frozen=True)
class Reply:
    status: int = 200
    body: Any = None
    delay: float = 0.0


Handler = Callable[[Request], Reply]


@dataclass
class Stub:
    url: str
    requests: list[Request] = field(default_factory=list)

    def count(self, path_prefix: str = "/") -> int:
        return sum(1 for r in list(self.requests) if r.path.startswith(path_prefix))


def chat_reply(
    content: str, model: str = "gpt-4o-mini", tokens: tuple[int, int] = (12, 5), delay: float = 0.0
) -> Reply:
    """An OpenAI chat.completion answer, sent after ``delay`` seconds."""
    prompt, completion = tokens
    return Reply(
        200,
        {
            "id": "chatcmpl-stub",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content},
                    "finish_reason": "stop",
                }
            ],
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
            },
        },
        delay,
    )


def error_reply(status: int, message: str = "stub error", delay: float = 0.0) -> Reply:
    """An OpenAI-style error body."""
    return Reply(status, {"error": {"message": message, "type": "stub", "code": status}}, delay)


def free_port() -> int:
    """A port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


@contextmanager
def serve(handler: Handler) -> Iterator[Stub]:
    """Run ``handler`` behind a threaded HTTP server until the block ends."""
    stub = Stub(url="")
    lock = threading.Lock()

    class _Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length) if length else b""
            request = Request(
                self.command,
                self.path,
                {k.lower(): v for k, v in self.headers.items()},
                json.loads(raw) if raw else None,
            )
            with lock:
                stub.requests.append(request)
            reply = handler(request)
            if reply.delay:
                time.sleep(reply.delay)
            data = json.dumps(reply.body).encode()
            self.send_response(reply.status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = _answer
        do_POST = _answer

        def log_message(self, format: str, *args: Any) -> None:
            pass

    class _Server(ThreadingHTTPServer):
        daemon_threads = True
        block_on_close = False

        def handle_error(self, request: Any, client_address: Any) -> None:
            pass  # a client that timed out and hung up is expected here

    server = _Server(("127.0.0.1", 0), _Handler)
    stub.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield stub
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def scripted(*replies: Reply, then: Reply | None = None) -> Handler:
    """Answer with ``replies`` in order, then ``then`` forever (thread-safe)."""
    queue = list(replies)
    lock = threading.Lock()

    def handler(_: Request) -> Reply:
        with lock:
            if queue:
                return queue.pop(0)
        if then is None:
            raise AssertionError("the stub ran out of scripted replies")
        return then

    return handler


async def eventually(check: Callable[[], Awaitable[bool]], within: float = 5.0) -> None:
    """Poll ``check`` until it holds; fail the test at the deadline."""
    deadline = time.monotonic() + within
    while not await check():
        if time.monotonic() >= deadline:
            raise AssertionError("condition not met before the deadline")
        await anyio.sleep(0.02)


def embeddings_reply(request: Request, model: str = "text-embedding-3-small") -> Reply:
    """An OpenAI embeddings answer: the deterministic stand-in vector of every input
    (``saga.steps.testing.ngram_vector``), a token per word as usage."""
    from saga.steps.testing import ngram_vector

    texts = request.body["input"]
    texts = [texts] if isinstance(texts, str) else texts
    tokens = sum(len(t.split()) for t in texts)
    data = [
        {"object": "embedding", "index": i, "embedding": ngram_vector(t)}
        for i, t in enumerate(texts)
    ]
    usage = {"prompt_tokens": tokens, "total_tokens": tokens}
    return Reply(200, {"object": "list", "data": data, "model": model, "usage": usage})


_RESULT = re.compile(
    r"^(?P<name>[A-Za-z][A-Za-z0-9 ]+?)  (?P<value>\d+(?:\.\d+)?) (?P<unit>[^\s\d]\S*)?",
    re.MULTILINE,
)


def reading_model(request: Request) -> Reply:
    """A chat model that reports every ``Name  value unit`` line it is sent, on page 1,
    with the unit printed after the value (a value without the unit its line prints is
    rejected by the `unit_is_printed` check, as a careless model's would be)."""
    text = request.body["messages"][-1]["content"]
    found = [{"name": m["name"], "value": float(m["value"]), "unit": m["unit"] or "",
              "page": 1, "line": m.group(0)}
             for m in _RESULT.finditer(text)]  # fmt: skip
    return chat_reply(json.dumps({"biomarkers": found}))
