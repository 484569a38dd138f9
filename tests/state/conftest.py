"""Fixtures of the state-machine tests: a StateMachine on the test's own key prefix,
with the consumer groups of every step created (as an executor does at start)."""

from __future__ import annotations

from typing import Any

import pytest

from saga.state.keys import Keys
from saga.state.machine import StateMachine
from saga.state.streams import ensure_groups
from tests.state.helpers import STEPS


@pytest.fixture
async def sm(redis: Any, keys: Keys) -> StateMachine:
    await ensure_groups(redis, keys, STEPS)
    return StateMachine(redis, keys)
