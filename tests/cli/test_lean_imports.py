"""saga.lean_imports: redis-py is imported without OpenTelemetry's metrics (SDK and API),
still works, and leaves both importable for whoever wants them."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

PROBE = """
import sys
import saga, redis
hidden = not {"opentelemetry.sdk.metrics", "opentelemetry.metrics"} & set(sys.modules)
r = redis.Redis.from_url(sys.argv[1])
pong = r.ping()
import opentelemetry.sdk.metrics as m  # visible again after redis's import
from saga.telemetry.metrics import CallbackOptions  # the worker's own metrics
print(hidden, pong, hasattr(m, "MeterProvider"))
"""


def run(*args: str) -> str:
    cmd = [sys.executable, "-c", *args]
    res = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr[-2000:]
    return res.stdout.strip()


def test_redis_imports_without_the_sdk_metrics_and_still_works(redis_url: str) -> None:
    assert run(PROBE, redis_url) == "True True True"


NO_OTEL = pytest.mark.skipif(
    importlib.util.find_spec("redis.observability") is None,
    reason="this redis-py has no OpenTelemetry instrumentation (before 8): nothing to hide",
)


@NO_OTEL
def test_without_saga_first_redis_pulls_the_sdk_in() -> None:
    """The control: the module this guards against is what redis-py imports on its own
    (if a redis-py release stops doing so, saga.lean_imports can go)."""
    probe = (
        "import sys, redis; "
        "print([m in sys.modules for m in ('opentelemetry.sdk.metrics', 'opentelemetry.metrics')])"
    )
    assert run(probe) == "[True, True]"


@NO_OTEL
def test_an_sdk_already_loaded_is_left_alone() -> None:
    probe = (
        "import sys, opentelemetry.sdk.metrics, saga, redis; "
        "from redis.observability import providers; print(providers.OTEL_AVAILABLE)"
    )
    assert run(probe) == "True"


def test_reading_the_settings_imports_no_redis_anyio_or_structlog() -> None:
    """Every command reads the settings first; what it then needs it imports itself."""
    probe = (
        "import sys, saga.config.settings; "
        "print([m for m in ('redis', 'anyio', 'structlog') if m in sys.modules])"
    )
    assert run(probe) == "[]"
