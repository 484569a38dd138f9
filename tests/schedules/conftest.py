"""Fixtures of the schedule tests: the test pipeline's type registered on the test's
prefix (as a worker or client does), and a fire pass on it."""

from __future__ import annotations

from typing import Any

import pytest

from saga.api.client import SagaClient
from saga.config.settings import Settings
from saga.controller.firing import Firing
from saga.state.keys import Keys
from saga.state.streams import ensure_groups
from saga.state.types import register_type
from tests.executor import pipelines


@pytest.fixture
async def registered(redis: Any, keys: Keys) -> Keys:
    """The test pipeline's type registered, its groups made: the keys of its sagas."""
    client = SagaClient(redis, keys, pipelines.pipeline(), Settings())
    await ensure_groups(redis, client.keys, list(pipelines.STEPS))
    await register_type(redis, client.keys, client.type_info)
    return client.keys


@pytest.fixture
def firing(redis: Any, keys: Keys) -> Firing:
    return Firing(redis, keys, Settings())
