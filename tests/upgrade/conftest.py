"""Worker processes and client settings of the upgrade tests (the App tests' fixtures)."""

from __future__ import annotations

from tests.app.conftest import base_env, settings, spawn

__all__ = ["base_env", "settings", "spawn"]
