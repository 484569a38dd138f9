"""Worker processes and client settings of the upgrade tests (the App tests' fixtures),
the previous release's venv, and a fault run for the rolling upgrade."""

from __future__ import annotations

import os
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.app.conftest import base_env, settings, spawn
from tests.faults.harness import FaultRun, fault_run
from tests.upgrade.previous_release import COMMIT
from tests.upgrade.release_venv import Release, ReleaseUnavailable, release_of

__all__ = ["base_env", "fleet_run", "previous_release", "settings", "spawn"]


@pytest.fixture(scope="session")
def previous_release(request: pytest.FixtureRequest) -> Release:
    """The previous release (tests/upgrade/previous_release.py) in its own venv, cached
    by commit in the pytest cache (the system's temp directory when the cache plugin is
    off, as in this project's addopts). Skipped only where the commit is not in the
    checkout."""
    store = getattr(request.config, "cache", None)
    if store is not None:
        cache = Path(store.mkdir("previous-release"))
    else:
        cache = Path(tempfile.gettempdir()) / f"saga-releases-{os.getuid()}"
    try:
        return release_of(COMMIT, cache)
    except ReleaseUnavailable as exc:
        pytest.skip(str(exc))


@pytest.fixture
async def fleet_run(tmp_path: Path, request: pytest.FixtureRequest) -> AsyncIterator[FaultRun]:
    """A fault run (tests/faults/harness.py) named for the test."""
    async with fault_run(request.node.name.removeprefix("test_"), tmp_path) as r:
        yield r
