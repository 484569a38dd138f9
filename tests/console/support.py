"""Helpers of the console tests: the real app under uvicorn on a loopback port (in a
thread of the test process, so each test has its own key prefix and server), HTTP
clients signed in as a role, and checks against the OpenAPI document."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import uvicorn

from saga.config.settings import load_settings
from saga.console.app import create_app
from saga.console.config import build_config
from saga.console.openapi import document
from saga.console.server import bind
from saga.console.tokens import Signer
from saga.state.keys import Keys

REPO = Path(__file__).resolve().parents[2]


class RunningConsole:
    """One console app served by uvicorn on 127.0.0.1 in a background thread."""

    def __init__(self, server: uvicorn.Server, thread: threading.Thread, url: str) -> None:
        self.server, self.thread, self.url = server, thread, url

    def client(self, token: str | None = None, **headers: str) -> httpx.AsyncClient:
        """An HTTP client of this console; with ``token`` as a bearer token."""
        if token:
            headers["Authorization"] = f"Bearer {token}"
        return httpx.AsyncClient(base_url=self.url, headers=headers, timeout=30)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=15)


TEST_SECRET = "console-test-secret-0123456789abcdef"
"""The console's secret (SAGA_CONSOLE_SECRET) in the tests' environments."""


def console_signer() -> Signer:
    """The HMAC signer of TEST_SECRET, to store tokens as `saga console token add` does."""
    return Signer(TEST_SECRET.encode())


def settings_env(redis_url: str, keys: Keys, data_dir: Path, **extra: str) -> dict[str, str]:
    return {
        "SAGA_CONSOLE_SECRET": TEST_SECRET,
        "REDIS_URL": redis_url,
        "SAGA_KEY_PREFIX": keys.prefix,
        "SAGA_PARTITIONS": str(keys.partitions),
        "SAGA_DATA_DIR": str(data_dir),
        "SAGA_LOG_FORMAT": "json",
        **extra,
    }


def serve(env: dict[str, str], *, dev: bool = False) -> RunningConsole:
    """Build the app from ``env`` (as ``saga console`` would) and serve it on a free port."""
    settings = load_settings(env)
    config = build_config(settings.console, dev=dev)
    sock = bind("127.0.0.1", 0)
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    app = create_app(settings, config)
    server = uvicorn.Server(
        uvicorn.Config(app, log_config=None, access_log=False, lifespan="on", proxy_headers=False)
    )
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise AssertionError("the console did not start")
        time.sleep(0.01)
    return RunningConsole(server, thread, url)


async def sign_in(client: httpx.AsyncClient, token: str) -> None:
    """Sign in through the login form, as a browser does (CSRF cookie, then the form)."""
    page = await client.get("/login")
    assert page.status_code == 200, page.text
    res = await client.post("/login", data={"token": token, "csrf": csrf_of(client)})
    assert res.status_code == 303, res.text
    assert res.headers["location"] == "/sagas"


def csrf_of(client: httpx.AsyncClient) -> str:
    return str(client.cookies["saga_csrf"])


async def run_cli(env: dict[str, str], *args: str) -> tuple[int, str, str]:
    """``saga <args>`` run in this process (a worker thread, ``env`` as its environment):
    the CLI's own code and output without a process start per call. (exit, out, err)"""
    import contextlib
    import io
    import os

    import anyio

    from saga.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    saved = dict(os.environ)
    os.environ.update(env)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = await anyio.to_thread.run_sync(main, list(args))
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return code, out.getvalue(), err.getvalue()


async def cli_json(env: dict[str, str], *args: str) -> Any:
    """``saga <args> --json`` in this process; it must exit 0."""
    import json

    code, out, err = await run_cli(env, *args, "--json")
    assert code == 0, err
    return json.loads(out)


def check_schema(name: str, data: Any) -> None:
    """``data`` is valid under the OpenAPI document's component schema ``name``."""
    root = {"$ref": f"#/components/schemas/{name}", "components": document()["components"]}
    jsonschema.Draft202012Validator(root).validate(data)


def walk(value: Any) -> Iterator[str]:
    """Every string inside a JSON value (keys and values)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield str(k)
            yield from walk(v)
    elif isinstance(value, list):
        for v in value:
            yield from walk(v)
