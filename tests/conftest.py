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
    ``-m slow`` or ``SAGA_SOAK=1``; the default run keeps their short versions. Under
    pytest-xdist (``--dist loadgroup``), tests sharing a module- or package-scoped
    fixture (a cluster, a browser stack) go to one worker, which sets it up once."""
    for item in items:
        group = _shared_fixture(item)
        if group and not item.get_closest_marker("xdist_group"):
            item.add_marker(pytest.mark.xdist_group(group))
    if os.environ.get("SAGA_SOAK") == "1" or "slow" in (config.getoption("markexpr") or ""):
        return
    slow = [item for item in items if "slow" in item.keywords]
    if slow:
        config.hook.pytest_deselected(items=slow)
        items[:] = [item for item in items if "slow" not in item.keywords]


def _shared_fixture(item: pytest.Item) -> str | None:
    """Where and what the first module- or package-scoped fixture ``item`` uses is."""
    info = getattr(item, "_fixtureinfo", None)
    for name in info.names_closure if info else ():
        defs = info.name2fixturedefs.get(name) or ()
        if defs and defs[-1].scope in ("module", "package") and name != "anyio_backend":
            return f"{defs[-1].baseid or item.nodeid.split('::')[0]}::{name}"
    return None


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
