"""Fixtures of the App tests: the executor tests' worker processes and settings for a
client on the test's server and key prefix."""

from __future__ import annotations

from pathlib import Path

import pytest

from saga.config.settings import Settings, load_settings
from saga.state.keys import Keys
from tests.executor.conftest import base_env, spawn

__all__ = ["base_env", "settings", "spawn"]


@pytest.fixture
def settings(redis_url: str, keys: Keys, tmp_path: Path) -> Settings:
    """Settings as a process on this test's server and key prefix would read them."""
    return load_settings(
        {
            "REDIS_URL": redis_url,
            "SAGA_KEY_PREFIX": keys.prefix,
            "SAGA_PARTITIONS": str(keys.partitions),
            "SAGA_DATA_DIR": str(tmp_path / "data"),
        }
    )
