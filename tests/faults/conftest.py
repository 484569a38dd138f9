"""Fixtures of the fault suite: each test gets a FaultRun (its own server on a TCP port,
workers, poller) named after the test."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.faults.harness import FaultRun, fault_run


@pytest.fixture
async def run(tmp_path: Path, request: pytest.FixtureRequest) -> AsyncIterator[FaultRun]:
    """A fault run named for the test; workers killed and the server stopped at the end."""
    async with fault_run(request.node.name.removeprefix("test_"), tmp_path) as r:
        yield r
