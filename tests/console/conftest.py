"""Fixtures of the console tests: a console per test on the test's key prefix, tokens of
each role, and a state machine to drive sagas into the states a test needs."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from saga.console.tokens import Role, add_stored_token
from saga.state.keys import Keys
from saga.state.machine import StateMachine
from tests.cli.inspect_support import machine
from tests.console.support import RunningConsole, console_signer, serve, settings_env

StartConsole = Callable[..., RunningConsole]


@pytest.fixture
def env(redis_url: str, keys: Keys, tmp_path: Path) -> dict[str, str]:
    """The environment of a console (and of the CLI) on the test's server and prefix."""
    return settings_env(redis_url, keys, tmp_path / "data")


@pytest.fixture
def start_console(env: dict[str, str]) -> Iterator[StartConsole]:
    """Start a console (``SAGA_CONSOLE_*`` given as keyword arguments); stopped at teardown."""
    running: list[RunningConsole] = []

    base = env

    def start(*, dev: bool = False, **extra: str) -> RunningConsole:
        c = serve({**base, **extra}, dev=dev)
        running.append(c)
        return c

    yield start
    for c in running:
        c.stop()


@pytest.fixture
def console(start_console: StartConsole) -> RunningConsole:
    return start_console()


@pytest.fixture
async def tokens(redis: Any, keys: Keys) -> dict[Role, str]:
    """A stored token for each role: named ``vic`` (viewer) and ``olga`` (operator)."""
    now = int(time.time() * 1000)
    return {
        Role.VIEWER: await add_stored_token(
            redis, keys, "vic", Role.VIEWER, signer=console_signer(), now_ms=now
        ),
        Role.OPERATOR: await add_stored_token(
            redis, keys, "olga", Role.OPERATOR, signer=console_signer(), now_ms=now
        ),
    }


@pytest.fixture
async def sm(redis: Any, keys: Keys) -> StateMachine:
    """A state machine on the test's prefix with the router/parser/grouper groups."""
    return await machine(redis, keys)
