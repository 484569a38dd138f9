"""Where the PHI search looks (tests/faults/test_phi_search.py): an OTLP endpoint that
keeps every span sent to it, every key of every type in Redis and SLOWLOG, CLI runs, the
console's pages and API read with a viewer's and an operator's token, and /metrics."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio
import httpx

from tests.executor.support import REPO, free_port, http_status, wait_until
from tests.faults.harness import read_metrics


@contextmanager
def trace_collector() -> Iterator[tuple[str, list[bytes]]]:
    """An OTLP/HTTP endpoint keeping every body it is sent (protobuf keeps strings as is)."""
    bodies: list[bytes] = []

    class Collector(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            bodies.append(self.rfile.read(int(self.headers.get("content-length") or 0)))
            self.send_response(200)
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Collector)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", bodies
    finally:
        server.shutdown()
        server.server_close()


async def redis_items(client: Any) -> list[tuple[str, str, bytes]]:
    """(key, field, value) of every key of every type, and ("SLOWLOG", "", entry)."""
    out: list[tuple[str, str, bytes]] = []
    async for raw in client.scan_iter(count=1000):
        key = raw.decode(errors="replace")
        kind = (await client.type(raw)).decode()
        out.append((key, "<key>", raw))
        if kind == "string":
            out.append((key, "", await client.get(raw) or b""))
        elif kind == "hash":
            out += [
                (key, k.decode(errors="replace"), v) for k, v in (await client.hgetall(raw)).items()
            ]
        elif kind == "stream":
            for entry_id, fields in await client.xrange(raw):
                out += [(key, f"{entry_id.decode()}:{k.decode()}", v) for k, v in fields.items()]
        elif kind == "zset":
            out += [(key, "<member>", m) for m in await client.zrange(raw, 0, -1)]
        elif kind == "set":
            out += [(key, "<member>", m) for m in await client.smembers(raw)]
        elif kind == "list":
            out += [(key, "<item>", m) for m in await client.lrange(raw, 0, -1)]
        else:
            out.append((key, f"<{kind}>", b""))
    for entry in await client.execute_command("SLOWLOG", "GET", "-1"):
        out.append(("SLOWLOG", "", repr(entry).encode()))
    return out


def saga_run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """``saga <args>`` as a process, output captured; exit 0 or 1 (a failed operation)."""
    done = subprocess.run(
        [sys.executable, "-m", "saga.cli.main", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode in (0, 1), done.stderr
    return done


def cli(env: dict[str, str], log: Path, *args: str) -> str:
    """``saga <args>`` as a process; its stderr (log lines and errors) goes to ``log``."""
    done = saga_run(env, *args)
    with log.open("a") as f:
        f.write(done.stderr)
    return done.stdout


@contextmanager
def console_process(env: dict[str, str], log: Path) -> Iterator[str]:
    port = free_port()
    out = open(log, "ab")  # noqa: SIM115 - the child keeps it
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "saga.cli.main", "console", "--port", str(port)],
            cwd=REPO,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
        )
    finally:
        out.close()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


async def read_console(
    env: dict[str, str], cli_log: Path, log: Path, rids: list[str]
) -> tuple[dict[str, str], dict[str, str]]:
    """The console's pages and API read with a viewer's token, then an operator's."""
    tokens = {
        role: json.loads(cli(env, cli_log, "console", "token", "add", f"t-{role}",
                             "--role", role, "--json"))["token"]
        for role in ("viewer", "operator")
    }  # fmt: skip
    with console_process(env, log) as url:

        async def up() -> bool:
            return http_status(int(url.rsplit(":", 1)[1]), "/livez") == 200

        await wait_until(up, within=30, what="the console")
        return (
            await console_texts(url, tokens["viewer"], rids),
            await console_texts(url, tokens["operator"], rids),
        )


async def console_texts(url: str, token: str, rids: list[str]) -> dict[str, str]:
    """Every page and API answer a person with ``token`` can read about these sagas."""
    paths = ["/sagas", "/sagas?state=failed", "/dead-letters", "/queues", "/api/v1/sagas"]
    paths += ["/api/v1/sagas?state=failed", "/api/v1/dead-letters", "/api/v1/queues"]
    for rid in rids:
        paths += [f"/sagas/{rid}", f"/sagas/{rid}/history", f"/api/v1/sagas/{rid}"]
    out = {}
    async with httpx.AsyncClient(
        base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=30
    ) as client:
        for path in paths:
            res = await client.get(path)
            assert res.status_code == 200, (path, res.status_code, res.text[:300])
            out[path] = res.text
    return out


async def wait_metrics(port: int) -> str:
    async def up() -> bool:
        return http_status(port, "/metrics") == 200

    await wait_until(up, within=10, what="/metrics")
    return await anyio.to_thread.run_sync(read_metrics, port)
