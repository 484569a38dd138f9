"""The lifecycle tests use the controller tests' process fixtures."""

from tests.controller.conftest import base_env, procs, sagas, sm

__all__ = ["base_env", "procs", "sagas", "sm"]
