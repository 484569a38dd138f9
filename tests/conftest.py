"""Shared fixtures: one real server per session (bundled valkey-server), a fresh
key prefix per test so tests never see each other's data."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from saga.adapters.embedded_redis import EmbeddedServer
from saga.state.connection import connect
from saga.state.keys import Keys

# pytest-xdist's workers export COLUMNS=80 and LINES=24; the CLI processes tests start
# would then fit their tables to 80 columns where a plain run prints them whole. Tests
# that want a width set COLUMNS themselves.
for _name in ("COLUMNS", "LINES"):
    os.environ.pop(_name, None)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Long soak/chaos variants (marked ``slow``) are deselected unless asked for with
    ``-m slow`` or ``SAGA_SOAK=1``; the default run keeps their short versions."""
    if os.environ.get("SAGA_SOAK") == "1" or "slow" in (config.getoption("markexpr") or ""):
        return
    slow = [item for item in items if "slow" in item.keywords]
    if slow:
        config.hook.pytest_deselected(items=slow)
        items[:] = [item for item in items if "slow" not in item.keywords]


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedServer]:
    """A real server on a unix socket for the whole session, stopped by pid at the end."""
    server = EmbeddedServer(data_dir=tmp_path_factory.mktemp("redis"))
    server.start()
    yield server
    server.stop()


@pytest.fixture
def redis_url(redis_server: EmbeddedServer) -> str:
    return redis_server.url


@pytest.fixture
def keys() -> Keys:
    """A key prefix no other test uses."""
    return Keys(prefix=f"t{uuid.uuid4().hex[:10]}", partitions=1)


@pytest.fixture
async def redis(redis_url: str) -> AsyncIterator[object]:
    client = connect(redis_url)
    yield client
    await client.aclose()


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path
