"""Fixtures of the controller tests: a StateMachine on the test's own key prefix with
every step's consumer group made (as the controller does at start)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from saga.api.client import SagaClient
from saga.config.settings import Settings
from saga.state.keys import Keys
from saga.state.machine import StateMachine
from saga.state.streams import ensure_groups
from tests.controller.support import Procs
from tests.executor import pipelines
from tests.executor.support import worker_base_env
from tests.state.helpers import STEPS


@pytest.fixture
async def sm(redis: Any, keys: Keys) -> StateMachine:
    await ensure_groups(redis, keys, STEPS)
    return StateMachine(redis, keys)


@pytest.fixture
def base_env(redis_url: str, keys: Keys, tmp_path: Path) -> dict[str, str]:
    """A process's environment: this test's server and prefix, the test pipeline, fast loops."""
    return worker_base_env(redis_url, keys, tmp_path / "saga-data")


@pytest.fixture
def procs(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Procs]:
    """Start `saga worker` / `saga controller` processes; all are killed (by pid) at teardown."""
    started = Procs(tmp_path)
    yield started
    started.kill_all()


@pytest.fixture
async def sagas(redis: Any, keys: Keys) -> AsyncIterator[SagaClient]:
    """A saga client on the test's prefix with the test pipeline."""
    yield SagaClient(redis, keys, pipelines.pipeline(), Settings())
