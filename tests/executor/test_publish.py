"""The document pipeline's fourth step, publish (SAGA_RESULTS_URL), against a real local
HTTP server that records what it received: results posted under the step's idempotency
key; a retry of an earlier step retracts them before posting again; a publish that fails
for good is compensated (its earlier publication retracted)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from saga.adapters.results import ResultsEndpoint
from saga.state.keys import Keys
from saga.state.reads import get_saga
from saga.steps.errors import PermanentError, RetryableError
from tests.executor.conftest import SpawnWorker
from tests.executor.support import wait_until
from tests.executor.test_documents_e2e import PIPELINE, saga_cli
from tests.steps.pdfgen import make_pdf

pytestmark = pytest.mark.anyio


class ResultsServer:
    """Records (method, path, Idempotency-Key, body) of every request; answers ``status``."""

    def __init__(self) -> None:
        self.received: list[tuple[str, str, str, Any]] = []
        self.status = {"POST": 201, "DELETE": 204}
        server = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                size = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(size) if size else b""
                body = json.loads(raw) if raw else None
                key = self.headers.get("Idempotency-Key", "")
                server.received.append((self.command, self.path, key, body))
                self.send_response(server.status[self.command])
                self.send_header("Content-Length", "0")
                self.end_headers()

            do_POST = do_DELETE = _answer

            def log_message(self, *args: Any) -> None:
                pass

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.http.daemon_threads = True
        self.thread = threading.Thread(target=self.http.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.http.server_address[1]}/results"

    def calls(self) -> list[tuple[str, str, str]]:
        return [(m, p, k) for m, p, k, _ in self.received]


@pytest.fixture
def results() -> Iterator[ResultsServer]:
    server = ResultsServer()
    server.thread.start()
    yield server
    server.http.shutdown()
    server.http.server_close()


async def test_publish_retract_and_compensate(
    spawn: SpawnWorker, keys: Keys, redis_url: str, redis: Any, tmp_path: Path,
    results: ResultsServer,
) -> None:  # fmt: skip
    """POST under r1:publish:e1; retry --step parser: DELETE e1, then POST e2; a publish
    refused for good (400) after a retry: its saga is compensated, e2 retracted."""
    env = {"SAGA_RESULTS_URL": results.url, "SAGA_DOCUMENT_ROOTS": str(tmp_path), **PIPELINE}
    env["SAGA_PUBLISH_BACKOFF"] = "0.05"
    (tmp_path / "r.pdf").write_bytes(make_pdf([["HbA1c  6.1  %  4.0 - 5.6"]]))
    spawn("router", "parser", "grouper", "publish", **env)
    started = saga_cli(keys, redis_url, "start", "r1", "u1", "--document",
                       str(tmp_path / "r.pdf"), "--wait", **env)  # fmt: skip
    assert started.returncode == 0, started.stdout + started.stderr
    assert results.calls() == [("POST", "/results", "r1:publish:e1")]
    body = results.received[0][3]
    assert (body["record_id"], body["user_id"], body["group_count"]) == ("r1", "u1", 1)
    assert body["groups"][0]["canonical_name"]

    async def completed_in(epoch: int) -> bool:
        s = await get_saga(redis, keys, "r1")
        return s.state == "completed" and s.epoch == epoch

    again = saga_cli(keys, redis_url, "retry", "r1", "--step", "parser", **env)
    assert again.returncode == 0, again.stderr
    await wait_until(lambda: completed_in(2), within=60, what="the re-run", every=0.05)
    assert results.calls()[1:] == [("DELETE", "/results/r1", "r1:publish:e1"),
                                   ("POST", "/results", "r1:publish:e2")]  # fmt: skip

    results.status["POST"] = 400
    refused = saga_cli(keys, redis_url, "retry", "r1", "--step", "publish", **env)
    assert refused.returncode == 0, refused.stderr

    async def compensated() -> bool:
        return (await get_saga(redis, keys, "r1")).state == "compensated"

    await wait_until(compensated, within=60, what="the compensation", every=0.05)
    assert results.calls()[3:] == [
        ("DELETE", "/results/r1", "r1:publish:e2"),  # publish retracts before posting
        ("POST", "/results", "r1:publish:e3"),  # refused: 400, for good
        ("DELETE", "/results/r1", "r1:publish:e2"),  # undo:publish, from its receipt
    ]
    saga = await get_saga(redis, keys, "r1")
    assert saga.error_class == "PermanentError" and "publish" not in saga.outputs


async def test_the_endpoint_says_what_is_retryable(results: ResultsServer) -> None:
    """5xx and 429 are retryable, other 4xx permanent; a retract of nothing (404) is done."""
    endpoint = ResultsEndpoint(results.url)
    try:
        assert await endpoint.publish("k1", b"{}") == 201
        for status, error in ((503, RetryableError), (429, RetryableError), (422, PermanentError)):
            results.status["POST"] = status
            with pytest.raises(error):
                await endpoint.publish("k1", b"{}")
        results.status["DELETE"] = 404
        assert await endpoint.retract("r/1", "k1") == 404
        assert results.calls()[-1] == ("DELETE", "/results/r%2F1", "k1")
    finally:
        await endpoint.aclose()
    closed = ResultsEndpoint("http://127.0.0.1:9/results", timeout_s=2)
    with pytest.raises(RetryableError, match="unreachable"):
        await closed.publish("k", b"{}")
