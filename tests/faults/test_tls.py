"""TLS to Redis with a CA made in the test (trustme) and a client certificate, against the
system ``redis-server`` started with TLS (the embedded valkey has none): a worker and the
CLI run over it; a wrong CA, a wrong host name and a missing client certificate are
refused; a CA file with a plain ``redis://`` URL and ``ssl_cert_reqs=none`` in the URL are
one sentence each (exit 2), the latter allowed only with SAGA_REDIS_TLS_INSECURE=1."""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import trustme

from saga.state.keys import Keys
from tests.executor.support import free_port, spawn_worker, worker_base_env
from tests.faults.harness import PIPELINE
from tests.faults.security import saga_cli

pytestmark = pytest.mark.anyio


def tls_server(tmp: Path, ca: trustme.CA) -> Iterator[int]:
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.skip("no system redis-server")
    cert = ca.issue_cert("localhost")  # not 127.0.0.1: that name is the wrong host
    cert.private_key_pem.write_to_path(str(tmp / "server.key"))
    cert.cert_chain_pems[0].write_to_path(str(tmp / "server.pem"))
    ca.cert_pem.write_to_path(str(tmp / "ca.pem"))
    port = free_port()
    proc = subprocess.Popen(
        [binary, "--port", "0", "--tls-port", str(port), "--bind", "127.0.0.1",
         "--tls-cert-file", str(tmp / "server.pem"), "--tls-key-file", str(tmp / "server.key"),
         "--tls-ca-cert-file", str(tmp / "ca.pem"), "--tls-auth-clients", "yes",
         "--save", "", "--appendonly", "no", "--dir", str(tmp)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            import socket

            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            time.sleep(0.05)
    if proc.poll() is not None:
        out = proc.stdout.read() if proc.stdout else ""
        pytest.fail(f"redis-server did not start with TLS (built without it?): {out[-500:]}")
    try:
        yield port
    finally:
        proc.kill()
        proc.wait(10)


@pytest.fixture
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture
def tls_port(tmp_path: Path, ca: trustme.CA) -> Iterator[int]:
    yield from tls_server(tmp_path, ca)


def env_for(
    tmp: Path, url: str, ca_file: Path | None, client: trustme.LeafCert | None
) -> dict[str, str]:
    env = worker_base_env(url, Keys(prefix="tls"), tmp / "data")
    env.update(SAGA_PIPELINE=PIPELINE, SAGA_RECOVERY_INTERVAL="0.5")
    if ca_file:
        env["SAGA_REDIS_CA_FILE"] = str(ca_file)
    if client:
        client.private_key_pem.write_to_path(str(tmp / "client.key"))
        client.cert_chain_pems[0].write_to_path(str(tmp / "client.pem"))
        env.update(
            SAGA_REDIS_CERT_FILE=str(tmp / "client.pem"),
            SAGA_REDIS_KEY_FILE=str(tmp / "client.key"),
        )
    return env


async def test_worker_and_cli_over_tls_with_a_client_certificate(
    tmp_path: Path, ca: trustme.CA, tls_port: int
) -> None:
    """rediss:// with the test's CA and a client certificate: a saga runs end to end."""
    env = env_for(
        tmp_path,
        f"rediss://localhost:{tls_port}/0",
        tmp_path / "ca.pem",
        ca.issue_cert("saga-worker"),
    )
    worker = spawn_worker(env, tmp_path / "worker.log", ["router", "parser", "grouper"])
    try:
        await worker.wait_ready(within=120)
        done = saga_cli(env, "start", "tls-1", "u1", "--wait", "--timeout", "30")
        assert done.returncode == 0, done.stderr + worker.tail()
        assert "completed" in saga_cli(env, "show", "tls-1").stdout
    finally:
        worker.kill()


def test_wrong_ca_wrong_host_and_no_client_certificate_are_refused(
    tmp_path: Path, ca: trustme.CA, tls_port: int
) -> None:
    """Another CA, the address not named in the certificate, no client certificate: each
    is refused with one sentence (exit 3), never a traceback."""
    other = trustme.CA()
    other.cert_pem.write_to_path(str(tmp_path / "other-ca.pem"))
    client = ca.issue_cert("saga-cli")
    cases = {
        "wrong CA": env_for(
            tmp_path, f"rediss://localhost:{tls_port}/0", tmp_path / "other-ca.pem", client
        ),
        "wrong host": env_for(
            tmp_path, f"rediss://127.0.0.1:{tls_port}/0", tmp_path / "ca.pem", client
        ),
        "no client certificate": env_for(
            tmp_path, f"rediss://localhost:{tls_port}/0", tmp_path / "ca.pem", None
        ),
    }
    for what, env in cases.items():
        done = saga_cli(env, "list")
        assert done.returncode == 3, (what, done.returncode, done.stderr)
        assert "Traceback" not in done.stderr and done.stderr.count("\n") == 1, (what, done.stderr)
    insecure = {
        **cases["wrong CA"],
        "REDIS_URL": f"rediss://localhost:{tls_port}/0?ssl_cert_reqs=none",
    }
    done = saga_cli(insecure, "list")
    assert done.returncode == 2 and "SAGA_REDIS_TLS_INSECURE" in done.stderr, done.stderr
    done = saga_cli({**insecure, "SAGA_REDIS_TLS_INSECURE": "1"}, "list")
    assert done.returncode == 0, done.stderr


def test_ca_file_with_a_plain_url_is_one_sentence(tmp_path: Path, ca: trustme.CA) -> None:
    """SAGA_REDIS_CA_FILE with redis://: exit 2 and one sentence (it was a raw TypeError)."""
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    env = env_for(tmp_path, f"redis://127.0.0.1:{free_port()}/0", tmp_path / "ca.pem", None)
    done = saga_cli(env, "list")
    assert done.returncode == 2 and "rediss://" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and done.stderr.count("\n") == 1
