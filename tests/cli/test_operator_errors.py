"""Operators' mistakes through the real entry point: a wrong REDIS_URL, a refused
password, an unknown option, a closed stdout, Ctrl-C, a long data dir. Each is one
sentence on stderr (or silence) and the documented exit code, never a traceback."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
import redis as sync_redis

from saga.adapters.embedded_redis import EmbeddedServer
from saga.state.keys import Keys
from tests.cli.inspect_support import cli, env_for, machine, spawn, start

pytestmark = pytest.mark.anyio


def one_sentence(res: subprocess.CompletedProcess[str]) -> str:
    """stderr, checked to be one ``saga: …`` line and no traceback."""
    assert "Traceback" not in res.stderr, res.stderr
    assert res.stderr.startswith("saga") and res.stderr.count("\n") == 1, res.stderr
    return res.stderr


@pytest.fixture
def http_port() -> Iterator[int]:
    """A tiny HTTP-ish server on a free port: it answers anything with ``HTTP/1.1 400``."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            with conn:
                conn.settimeout(2)
                try:
                    conn.recv(4096)
                    conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
                except OSError:
                    pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield int(listener.getsockname()[1])
    stop.set()
    thread.join(5)
    listener.close()


def test_http_service_on_the_port_is_not_redis(keys: Keys, http_port: int) -> None:
    """A non-Redis service at REDIS_URL: exit 3, one sentence saying it is not Redis."""
    res = cli(keys, f"redis://127.0.0.1:{http_port}/0", "list")
    assert res.returncode == 3
    assert "does not speak the Redis protocol" in one_sentence(res)


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("http://127.0.0.1:8080", "scheme"),
        ("redis://h:notaport", "notaport"),
        ("redis://127.0.0.1:99999/0", "out of range"),
    ],
)
def test_malformed_redis_url_is_an_invalid_setting(keys: Keys, url: str, words: str) -> None:
    """A REDIS_URL that cannot be parsed is an invalid setting: exit 2, one sentence."""
    res = cli(keys, url, "start", "mr-1", "u-1")
    assert res.returncode == 2
    err = one_sentence(res)
    assert "REDIS_URL" in err and words in err


@pytest.fixture(scope="module")
def password_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real server on a TCP port that requires the password ``right``; its URL's host."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = EmbeddedServer(data_dir=tmp_path_factory.mktemp("auth"), port=port)
    server.start()
    with sync_redis.Redis(unix_socket_path=str(server.socket_path)) as admin:
        admin.config_set("requirepass", "right")
    yield f"127.0.0.1:{port}"
    server.stop()


@pytest.mark.parametrize("auth", [":wrong@", "", "nobody:right@"])
def test_refused_credentials_are_not_reported_as_unreachable(
    keys: Keys, password_server: str, auth: str
) -> None:
    """A wrong or missing password says authentication failed (exit 2), not "cannot reach"."""
    res = cli(keys, f"redis://{auth}{password_server}/0", "list")
    err = one_sentence(res)
    assert res.returncode == 2, err
    assert "authentication failed" in err and "cannot reach" not in err
    assert "wrong" not in err.replace("WRONGPASS", "")  # the password is never printed


def test_right_password_works(keys: Keys, password_server: str) -> None:
    """The same server with the right password answers (the refusals above are real)."""
    res = cli(keys, f"redis://:right@{password_server}/0", "list")
    assert res.returncode == 0, res.stderr


def test_closed_stdout_exits_quietly(keys: Keys, redis_url: str) -> None:
    """Output into a pipe whose reader has gone: no message, exit 141 (128 + SIGPIPE)."""
    cli(keys, redis_url, "start", "mr-1", "u-1")
    read_end, write_end = os.pipe()
    os.close(read_end)  # `| head -1` after its first line: nobody reads any more
    try:
        res = subprocess.run(
            [sys.executable, "-m", "saga.cli.main", "list"],
            env=env_for(keys, redis_url),
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
            check=False,
        )
    finally:
        os.close(write_end)
    assert res.stderr == ""
    assert res.returncode == 141


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["start", "-rec", "u1"], "unknown option -rec"),
        (["list", "--bogus"], "unknown option --bogus"),
        (["dlq", "purge", "--stp", "parser"], "unknown option --stp"),
    ],
)
def test_unknown_option_is_named(keys: Keys, redis_url: str, argv: list[str], named: str) -> None:
    """An unknown option is named in one sentence (not "required: user_id"), exit 2."""
    res = cli(keys, redis_url, *argv)
    assert res.returncode == 2
    err = one_sentence(res)
    assert named in err and "--help" in err


async def test_ctrl_c_on_follow_exits_130(redis: Any, keys: Keys, redis_url: str) -> None:
    """Ctrl-C ends `saga show --follow` with 130, the shell's code for an interrupt."""
    sm = await machine(redis, keys)
    await start(sm, "mr-f")
    proc = spawn(keys, redis_url, "show", "mr-f", "--follow", stdout=subprocess.PIPE)
    assert proc.stdout is not None
    try:
        with anyio.fail_after(30):  # the first render is printed: the loop is running
            while "timeline" not in await anyio.to_thread.run_sync(
                proc.stdout.readline, abandon_on_cancel=True
            ):
                pass
        proc.send_signal(signal.SIGINT)
        await anyio.to_thread.run_sync(lambda: proc.communicate(timeout=20))
    finally:
        proc.kill() if proc.poll() is None else None
    assert proc.returncode == 130


def test_long_data_dir_still_runs_the_embedded_server(tmp_path: Path) -> None:
    """A SAGA_DATA_DIR whose socket path passes 107 bytes works (the socket moves)."""
    data = tmp_path / ("d" * max(1, 110 - len(str(tmp_path))))
    env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
    env.update(SAGA_DATA_DIR=str(data), SAGA_LOG_FORMAT="json")

    def saga(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "saga.cli.main", *argv], env=env,
                              capture_output=True, text=True, timeout=120, check=False)  # fmt: skip

    assert len(str(data / "saga.sock")) > 107
    try:
        res = saga("start", "mr-1", "u-1")
        assert res.returncode == 0, res.stderr
        assert saga("show", "mr-1").returncode == 0
    finally:
        assert saga("server", "stop").returncode == 0


def test_llm_timeout_is_not_a_step(keys: Keys) -> None:
    """SAGA_LLM_TIMEOUT sets the LLM timeout and adds no step named `llm` to `saga config`."""
    res = cli(keys, "redis://127.0.0.1:1/0", "config", "--json", env={"SAGA_LLM_TIMEOUT": "30"})
    assert res.returncode == 0, res.stderr
    assert '"steps": {}' in res.stdout and '"llm_timeout_s": 30.0' in res.stdout


@pytest.mark.parametrize(("url", "code"), [("http://x", 2), ("redis://127.0.0.1:1/0", 3)])
def test_console_checks_redis_before_it_says_it_started(keys: Keys, url: str, code: int) -> None:
    """`saga console` with a bad REDIS_URL is the one sentence and exit code every other
    command gives (2 invalid, 3 unreachable), and prints no URL as if it had started."""
    res = cli(keys, url, "console", "--dev", "--port", "0", timeout=60)
    assert res.returncode == code, res.stderr
    assert "REDIS_URL" in one_sentence(res)
    assert res.stdout == ""


def test_up_with_a_bad_url_says_so_once(keys: Keys) -> None:
    """`saga up` with a bad REDIS_URL says it once (not once per worker), exit 2."""
    res = cli(keys, "http://x", "up", timeout=120)
    assert res.returncode == 2, res.stderr
    assert "REDIS_URL" in one_sentence(res)


def test_a_taken_port_is_exit_2_for_the_console_as_for_a_worker(keys: Keys, redis_url: str) -> None:
    """A port in use is a setting to change (exit 2) for the console and a worker alike."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = str(taken.getsockname()[1])
        console = cli(keys, redis_url, "console", "--dev", "--port", port)
        worker = cli(keys, redis_url, "worker", "router", "--health-port", port)
    assert (console.returncode, worker.returncode) == (2, 2), (console.stderr, worker.stderr)
    assert "pick another --port" in one_sentence(console)


async def test_large_json_into_head_exits_141(redis: Any, keys: Keys, redis_url: str) -> None:
    """`saga list --json | head -1` on an output far larger than a pipe's buffer: the
    reader goes after one line; no message, exit 141, as documented."""
    sm = await machine(redis, keys)
    for i in range(400):
        await start(sm, f"mr-{i:04d}")
    script = f"{sys.executable} -m saga.cli.main list --json --limit 400 | head -1 >/dev/null; " \
             "echo ${PIPESTATUS[0]}"  # fmt: skip
    res = await anyio.to_thread.run_sync(
        lambda: subprocess.run(["bash", "-c", script], env=env_for(keys, redis_url),
                               capture_output=True, text=True, timeout=60, check=False)
    )  # fmt: skip
    assert res.stderr == "" and res.stdout == "141\n", (res.stdout, res.stderr)
