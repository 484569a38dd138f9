"""Fixtures of the cluster tests: one three-primary cluster for the whole package,
a fresh key prefix (four partitions) and a cluster client per test."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from saga.state.connection import connect
from saga.state.keys import Keys
from tests.cluster.local_cluster import LocalCluster


@pytest.fixture(scope="package")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    c = LocalCluster(tmp_path_factory.mktemp("cluster"))
    try:
        c.start()
        yield c
    finally:
        c.stop()


@pytest.fixture
def keys() -> Keys:
    return Keys(prefix=f"c{uuid.uuid4().hex[:8]}", partitions=4)


@pytest.fixture
async def client(cluster: LocalCluster) -> AsyncIterator[Any]:
    c = connect(cluster.url, cluster=True)
    await c.initialize()  # the slot map, before get_node_from_key
    yield c
    await c.aclose()


@pytest.fixture(scope="package")
def replicated(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """Three primaries with one replica each (six nodes), node timeout 1 s."""
    c = LocalCluster(tmp_path_factory.mktemp("replicated"), replicas=1)
    try:
        c.start(within_s=60)
        yield c
    finally:
        c.stop()
