"""Per-step overrides: ``SAGA_<STEP>_CONCURRENCY|MAX_ATTEMPTS|...`` into StepSettings.

Read by ``saga.config.settings.load_settings``, which passes in its checked number reader.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

import msgspec


class StepSettings(msgspec.Struct, frozen=True, kw_only=True):
    """Per-step overrides: ``SAGA_<STEP>_CONCURRENCY|MAX_ATTEMPTS|TIMEOUT|LEASE``."""

    concurrency: int | None = None
    """Attempts of this step one worker runs at once."""
    max_attempts: int | None = None
    """Attempts before the saga is dead-lettered at this step."""
    max_lease_expiries: int | None = None
    """Attempts that may end by lease expiry (worker killed or stalled) before the saga
    is dead-lettered at this step; counted apart from ``max_attempts`` (default 8)."""
    timeout_s: float | None = None
    """An attempt running longer is cancelled and counts as a retryable failure."""
    lease_s: float | None = None
    """How long a claim holds without a heartbeat before another worker may take it."""
    backoff_s: float | None = None
    """Base of the retry delay: ``min(2^attempt * base, 300)`` seconds (default 2)."""
    user_max_inflight: int | None = None
    """Attempts of this step one user may have running at once (``SAGA_USER_MAX_INFLIGHT``)."""
    map_concurrency: int | None = None
    """A map step's items of one saga open at once (``@app.map(concurrency=)``, 1-100)."""


_STEP_VAR = re.compile(
    r"SAGA_([A-Z][A-Z0-9_]*?)_(MAP_CONCURRENCY|CONCURRENCY|MAX_ATTEMPTS|MAX_LEASE_EXPIRIES|TIMEOUT|LEASE|BACKOFF|USER_MAX_INFLIGHT)"
)
_NOT_STEP_VARS = frozenset({"SAGA_LLM_TIMEOUT", "SAGA_REDIS_TIMEOUT", "SAGA_OCR_CONCURRENCY"})
"""Settings of their own whose names look like a step's override (step ``llm``, ``ocr``)."""
_STEP_FIELD = {
    "CONCURRENCY": "concurrency",
    "MAP_CONCURRENCY": "map_concurrency",
    "MAX_ATTEMPTS": "max_attempts",
    "MAX_LEASE_EXPIRIES": "max_lease_expiries",
    "TIMEOUT": "timeout_s",
    "LEASE": "lease_s",
    "BACKOFF": "backoff_s",
    "USER_MAX_INFLIGHT": "user_max_inflight",
}

NumberReader = Callable[[str, float, type], float]
"""``num(name, default, kind)``: the variable as a checked, non-negative number."""


def step_settings(env: Mapping[str, str], num: NumberReader) -> dict[str, StepSettings]:
    """Every step's overrides in ``env``, by lower-case step name (set ones only).

    Raises msgspec.ValidationError for a value StepSettings refuses."""
    steps: dict[str, dict[str, float]] = {}
    for name, value in env.items():
        m = _STEP_VAR.fullmatch(name)
        if m and value.strip() and name not in _NOT_STEP_VARS:
            kind = float if m.group(2) in ("TIMEOUT", "LEASE", "BACKOFF") else int
            steps.setdefault(m.group(1).lower(), {})[_STEP_FIELD[m.group(2)]] = num(name, 0, kind)
    return {k: msgspec.convert(v, StepSettings) for k, v in steps.items()}
