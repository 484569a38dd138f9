"""Fixtures of the executor tests: worker processes wired to the test's key prefix,
a saga client with the test pipeline, and a server of the test's own (to kill)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from saga.adapters.embedded_redis import EmbeddedServer
from saga.api.client import SagaClient
from saga.config.settings import Settings
from saga.state.keys import Keys
from tests.executor import pipelines
from tests.executor.support import Worker, spawn_worker, worker_base_env, worker_env

SpawnWorker = Callable[..., Worker]


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    if report.when == "call":
        item.stash[_FAILED] = report.failed
    return report


_FAILED = pytest.StashKey[bool]()


@pytest.fixture
def base_env(redis_url: str, keys: Keys, tmp_path: Path) -> dict[str, str]:
    """The environment of a worker: this test's server and prefix, fast loops, JSON logs."""
    return worker_base_env(redis_url, keys, tmp_path / "saga-data")


@pytest.fixture
def spawn(
    base_env: dict[str, str], tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[SpawnWorker]:
    """Start ``saga worker`` processes; every one is killed (by pid) at teardown."""
    started: list[Worker] = []

    def start(
        *steps: str, env: dict[str, str] | None = None, own_port: bool = True, **overrides: str
    ) -> Worker:
        log = tmp_path / f"worker-{len(started)}.log"
        w = spawn_worker(
            worker_env(env or base_env, **overrides),
            log,
            steps or pipelines.STEPS,
            own_port=own_port,
        )
        started.append(w)
        return w

    yield start
    for w in started:
        w.kill()
    if request.node.stash.get(_FAILED, False):
        for w in started:
            print(w.tail(80))


@pytest.fixture
async def sagas(redis: Any, keys: Keys) -> AsyncIterator[SagaClient]:
    """A saga client on the test's prefix, with the test pipeline (groups made on first start)."""
    client = SagaClient(redis, keys, pipelines.pipeline(), Settings())
    yield client


@pytest.fixture
def own_server(tmp_path: Path) -> Iterator[EmbeddedServer]:
    """A server only this test uses (AOF on, unix socket), so it may be killed and restarted."""
    server = EmbeddedServer(data_dir=tmp_path / "own-redis", tied=True)
    server.start()
    yield server
    server.stop()
