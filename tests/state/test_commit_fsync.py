"""SAGA_COMMIT_DURABILITY=fsync: a start, and a batch of commits, is followed by one
WAITAOF in the same pipeline (never one per commit); fsync+replica asks the replicas'
AOFs too; a server without WAITAOF (system redis-server 7.0) or with its AOF off is
refused in one sentence, by the library, ``saga start`` and ``saga worker`` (exit 2)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from saga.config.settings import SettingsError, load_settings
from saga.state.connection import NotReplicatedError, connect
from saga.state.durability import check_durability
from saga.state.errors import DurabilityError
from saga.state.keys import GROUP, Keys
from saga.state.limits import StateLimits
from saga.state.machine import StateMachine
from saga.state.model import Claim
from saga.state.requests import CommitRequest
from saga.state.scripts import ensure_loaded
from saga.state.streams import ensure_groups
from tests.executor.support import REPO, free_port

pytestmark = pytest.mark.anyio

FSYNC = StateLimits(commit_fsync=True, replica_wait_ms=2000)


async def calls(client: Any, command: str) -> int:
    stat = (await client.info("commandstats")).get(f"cmdstat_{command}", {})
    return int(stat.get("calls", 0))


async def claimed(sm: StateMachine, client: Any, keys: Keys, n: int) -> list[Claim]:
    reply = await client.xreadgroup(GROUP, "w", {keys.ready(0, "router"): ">"}, count=n)
    pairs = [(i.decode(), f[b"rid"].decode()) for _, rows in reply or [] for i, f in rows]
    outs = await sm.claim("router", 0, pairs, worker="w", lease_ms=30_000, max_lease_expiries=3)
    return [o.claim for o in outs if o.claim is not None]


@pytest.mark.parametrize("fsync", [False, True])
async def test_one_waitaof_per_start_and_per_batch(redis: Any, keys: Keys, fsync: bool) -> None:
    """Five starts cost five WAITAOFs and a batch of their five commits one more with
    durability=fsync; none with local. Every call is acknowledged and committed."""
    await ensure_loaded(redis)
    await ensure_groups(redis, keys, ["router", "parser"])
    sm = StateMachine(redis, keys, FSYNC if fsync else StateLimits())
    before = await calls(redis, "waitaof")
    for i in range(5):
        assert (await sm.start(f"f-{i}", "u1", "router")).created
    assert await calls(redis, "waitaof") - before == (5 if fsync else 0)
    claims = await claimed(sm, redis, keys, 5)
    assert len(claims) == 5
    before = await calls(redis, "waitaof")
    req = CommitRequest(output=b"{}", next_step="parser", worker="w")
    outcomes = await sm.finish_many([(c, req) for c in claims])
    assert [o.code for o in outcomes] == [0] * 5
    assert await calls(redis, "waitaof") - before == (1 if fsync else 0)
    assert await redis.hget(keys.saga("f-0"), "step") == b"parser"


async def test_fsync_and_replica_waits_for_a_replica_aof(redis: Any, keys: Keys) -> None:
    """fsync+replica on a server without replicas: the primary's fsync is not enough,
    the start raises NotReplicatedError (after its re-sends, each with one WAITAOF, never
    a WAIT)."""
    await ensure_loaded(redis)
    await ensure_groups(redis, keys, ["router"])
    limits = StateLimits(commit_fsync=True, commit_replicas=1, replica_wait_ms=50)
    sm = StateMachine(redis, keys, limits)
    waits, aofs = await calls(redis, "wait"), await calls(redis, "waitaof")
    with pytest.raises(NotReplicatedError, match="0 of 1 replica"):
        await sm.start("fr-1", "u1", "router")
    assert await calls(redis, "wait") == waits
    assert await calls(redis, "waitaof") > aofs


def test_settings_spell_the_combinations() -> None:
    def durability(raw: str) -> tuple[str, bool, int]:
        s = load_settings({"SAGA_COMMIT_DURABILITY": raw})
        return s.commit_durability, s.limits.commit_fsync, s.limits.commit_replicas

    assert durability("local") == ("local", False, 0)
    assert durability("fsync") == ("fsync", True, 0)
    assert durability("replica") == ("replica", False, 1)
    assert durability("replica+fsync") == durability("FSYNC,replica") == ("fsync+replica", True, 1)
    for bad in ("disk", "fsync+local", "+"):
        with pytest.raises(SettingsError, match="must be local, replica, fsync or fsync\\+replica"):
            durability(bad)


@pytest.fixture
def redis_70(tmp_path: Path) -> Iterator[str]:
    """The system redis-server (7.0: no WAITAOF), AOF on, on a free port."""
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.skip("no system redis-server")
    done = subprocess.run([binary, "--version"], capture_output=True, text=True, check=False)
    version = done.stdout
    if "v=7.0." not in version:
        pytest.skip(f"the system redis-server is not 7.0 ({version.strip()})")
    port = free_port()
    proc = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(tmp_path),
         "--appendonly", "yes", "--save", ""],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 10
        while subprocess.run(["redis-cli", "-p", str(port), "ping"], capture_output=True,
                             text=True, check=False).stdout.strip() != "PONG":  # fmt: skip
            assert time.monotonic() < deadline, "redis-server did not answer PING"
            time.sleep(0.05)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        proc.kill()
        proc.wait(10)


async def test_a_server_without_waitaof_is_refused(redis_70: str) -> None:
    client = connect(redis_70)
    try:
        await check_durability(client, StateLimits())  # local: nothing asked, nothing sent
        with pytest.raises(DurabilityError, match=r"needs WAITAOF .*\(redis 7\.0\.\d+\) lacks"):
            await check_durability(client, FSYNC)
    finally:
        await client.aclose()


async def test_everysec_and_aof_off_are_refused(tmp_path: Path) -> None:
    """appendfsync always passes; everysec (WAITAOF confirmed before the fsync) and the
    AOF off are each refused in one sentence."""
    from saga.adapters.embedded_redis import EmbeddedServer

    server = EmbeddedServer(data_dir=tmp_path / "r", port=free_port(), appendfsync="always")
    server.start()
    client = connect(server.url)
    try:
        await check_durability(client, FSYNC)
        await client.config_set("appendfsync", "everysec")
        with pytest.raises(DurabilityError, match="needs appendfsync always, and the server has "
                           "appendfsync everysec"):  # fmt: skip
            await check_durability(client, FSYNC)
        await client.config_set("appendonly", "no")
        with pytest.raises(DurabilityError, match="needs the server's append-only file, which is"):
            await check_durability(client, FSYNC)
    finally:
        await client.aclose()
        server.stop()


@pytest.mark.parametrize("command", [["start", "r-1", "u-1"], ["worker", "router"]])
def test_the_cli_refuses_in_one_sentence(redis_70: str, tmp_path: Path, command: list[str]) -> None:
    env = {"PATH": "/usr/bin:/bin", "REDIS_URL": redis_70, "SAGA_COMMIT_DURABILITY": "fsync",
           "SAGA_DATA_DIR": str(tmp_path), "SAGA_LOG_FORMAT": "json", "SAGA_HEALTH_PORT": "0",
           "LITELLM_LOCAL_MODEL_COST_MAP": "True", "PYTHONPATH": str(REPO)}  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-m", "saga.cli.main", *command],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert "SAGA_COMMIT_DURABILITY=fsync needs WAITAOF" in done.stderr, done.stderr


def test_the_embedded_server_runs_always_under_fsync(tmp_path: Path) -> None:
    """Started under fsync it runs ``appendfsync always``; one already running under
    ``everysec`` (started for local) is switched when a fsync command reuses it."""
    import redis

    from saga.wiring.runtime import ensure_embedded

    local = load_settings({"SAGA_DATA_DIR": str(tmp_path)})
    fsync = load_settings({"SAGA_DATA_DIR": str(tmp_path), "SAGA_COMMIT_DURABILITY": "fsync"})
    server = ensure_embedded(local)
    try:
        client = redis.Redis(unix_socket_path=str(server.socket_path))
        assert client.config_get("appendfsync") == {"appendfsync": "everysec"}
        ensure_embedded(fsync)
        assert client.config_get("appendfsync") == {"appendfsync": "always"}
        client.close()
    finally:
        server.stop()
    server = ensure_embedded(fsync)
    try:
        client = redis.Redis(unix_socket_path=str(server.socket_path))
        assert client.config_get("appendfsync") == {"appendfsync": "always"}
        client.close()
    finally:
        server.stop()
