"""A circuit breaker per dependency whose state lives in Redis.

Every executor reads the same breaker, so one outage seen by a few calls
parks the whole fleet at once instead of each process rediscovering it::

    closed ──K failures within window_s──▶ open ──cooldown_s──▶ half_open
      ▲                                     ▲                       │
      └──────────── probe succeeds ─────────┼── probe fails ────────┘

While open, ``before_call`` raises ``CircuitOpenError(name, retry_at)`` and the
executor parks the step until ``retry_at`` without spending an attempt; so does
``record_failure`` for a failed probe (see there). Past
the cool-down exactly one caller at a time becomes the probe (a ``SET NX PX``
lease, so a probe that dies is replaced after ``probe_ttl_s``); the others are
refused until the probe reports.

Each transition is one small Lua script in ``adapters/lua/`` using the
server's clock, so executors with skewed clocks agree.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from enum import IntEnum, StrEnum
from importlib import resources
from typing import Any

import anyio
import msgspec
import structlog
from redis.exceptions import NoScriptError

from saga.state.keys import Keys
from saga.state.scripts import eval_source, load_sources
from saga.steps.errors import CircuitOpenError

__all__ = [
    "BILLING",
    "EMBEDDING",
    "LLM",
    "NAMES",
    "BreakerPolicy",
    "BreakerState",
    "BreakerStatus",
    "CircuitBreaker",
    "Script",
    "load_script",
    "read_all",
]

_log = structlog.get_logger("saga.breaker")

from saga.adapters.breaker_names import BILLING, EMBEDDING, LLM, NAMES  # noqa: E402

"""Every breaker saga has, one per dependency (``saga top`` shows them all)."""


class _Acquire(IntEnum):
    """Return codes of breaker_acquire.lua."""

    CLOSED = 0
    OPEN = 1
    PROBE = 2
    PROBE_BUSY = 3


class _Failure(IntEnum):
    """Return codes of breaker_failure.lua."""

    COUNTED = 0
    OPENED = 1
    REOPENED = 2
    IGNORED = 3


@functools.cache
def _source(name: str) -> str:
    return (resources.files("saga.adapters") / "lua" / f"{name}.lua").read_text("utf-8")


class Script:
    """``adapters/lua/<name>.lua``, called by SHA, and by its source (EVAL, which caches
    it again) when the server has lost it. redis-py's ``register_script`` reloads with
    SCRIPT LOAD then repeats EVALSHA, which a second flush in between (a failover, a
    ``SCRIPT FLUSH`` storm) turns into an unhandled NoScriptError."""

    def __init__(self, redis: Any, source: str) -> None:
        self.redis, self.source = redis, source
        self.sha = hashlib.sha1(source.encode()).hexdigest()

    async def __call__(self, keys: Sequence[Any] = (), args: Sequence[Any] = ()) -> Any:
        try:
            return await self.redis.evalsha(self.sha, len(keys), *keys, *args)
        except NoScriptError:  # an EVALSHA-only user gets ScriptsMissingError: it waits
            return await eval_source(self.redis, self.source, list(keys), list(args))


def load_script(redis: Any, name: str) -> Script:
    """``adapters/lua/<name>.lua`` on ``redis``, safe against NOSCRIPT."""
    return Script(redis, _source(name))


SCRIPT_NAMES = (
    "breaker_acquire",
    "breaker_failure",
    "breaker_status",
    "breaker_success",
    "release_lock",
)


async def ensure_loaded(redis: Any) -> None:
    """SCRIPT LOAD every adapter script (``saga init``), for EVALSHA-only users."""
    await load_sources(redis, [_source(n) for n in SCRIPT_NAMES])


@dataclass(frozen=True, slots=True)
class BreakerPolicy:
    """When a breaker opens and how long it stays open."""

    failures: int = 5
    """Failures within ``window_s`` that open the circuit."""
    window_s: float = 30.0
    """Length of the sliding window failures are counted in (seconds)."""
    cooldown_s: float = 30.0
    """How long the circuit stays open before one probe is let through (seconds)."""
    probe_ttl_s: float = 120.0
    """Lease of a probe that never reports (it crashed); longer than the call's timeout."""

    def __post_init__(self) -> None:
        if self.failures < 1:
            raise ValueError(f"failures must be at least 1, got {self.failures}")
        for name in ("window_s", "cooldown_s", "probe_ttl_s"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")


class BreakerState(StrEnum):
    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


class BreakerStatus(msgspec.Struct, frozen=True, kw_only=True):
    """A breaker as every executor sees it; times are epoch seconds, None when closed."""

    state: BreakerState
    failures: int
    opened_at: float | None = None
    retry_at: float | None = None


def _ms(seconds: float) -> int:
    return max(1, round(seconds * 1000))


def _seconds(ms: Any) -> float | None:
    value = int(ms)
    return value / 1000 if value else None


class CircuitBreaker:
    """The shared breaker of one dependency (one of ``NAMES``)."""

    def __init__(self, redis: Any, keys: Keys, name: str, policy: BreakerPolicy) -> None:
        self.name = name
        self.policy = policy
        self._keys = [keys.breaker(name), keys.breaker_failures(name), keys.breaker_probe(name)]
        self._acquire = load_script(redis, "breaker_acquire")
        self._failure = load_script(redis, "breaker_failure")
        self._success = load_script(redis, "breaker_success")
        self._status = load_script(redis, "breaker_status")

    def __repr__(self) -> str:
        return f"CircuitBreaker(name={self.name!r}, policy={self.policy!r})"

    async def before_call(self) -> None:
        """Return if a call may go ahead; raise CircuitOpenError while it may not."""
        breaker, _, probe = self._keys
        recheck_s = min(self.policy.cooldown_s, 5.0)
        code, retry_at_ms = await self._acquire(
            keys=[breaker, probe], args=[_ms(self.policy.probe_ttl_s), _ms(recheck_s)]
        )
        if code in (_Acquire.CLOSED, _Acquire.PROBE):
            if code == _Acquire.PROBE:
                _log.info("circuit_half_open", breaker=self.name)
            return
        raise CircuitOpenError(self.name, int(retry_at_ms) / 1000)

    async def record_success(self) -> None:
        """The dependency answered; a half-open circuit closes."""
        if await self._success(keys=self._keys) == 1:
            _log.info("circuit_closed", breaker=self.name)

    async def record_failure(self) -> None:
        """The dependency failed (outage-class error); may open the circuit.

        Raises CircuitOpenError when the circuit was open before this failure counted:
        this call was the half-open probe and failed, or it was let through before
        another opened the circuit. Such a failure says the dependency is down, not that
        the step failed, so the attempt parks without being spent; otherwise a long
        outage would dead-letter sagas through probes alone. The failures that open the
        circuit spend their attempts as any failure does."""
        p = self.policy
        code, failures, retry_at_ms = await self._failure(
            keys=self._keys, args=[p.failures, _ms(p.window_s), _ms(p.cooldown_s)]
        )
        if code in (_Failure.OPENED, _Failure.REOPENED):
            _log.warning(
                "circuit_opened",
                breaker=self.name,
                failures=int(failures),
                probe_failed=code == _Failure.REOPENED,
                retry_at=int(retry_at_ms) / 1000,
            )
        if code in (_Failure.REOPENED, _Failure.IGNORED):
            raise CircuitOpenError(self.name, int(retry_at_ms) / 1000)

    async def state(self) -> BreakerStatus:
        """The breaker's current state, failure count in the window and times."""
        return _decode(await self._status(keys=self._keys[:2]))


def _decode(reply: Sequence[Any]) -> BreakerStatus:
    state, failures, opened_at, retry_at = reply
    text = state.decode() if isinstance(state, bytes) else str(state)
    return BreakerStatus(
        state=BreakerState(text),
        failures=int(failures),
        opened_at=_seconds(opened_at),
        retry_at=_seconds(retry_at),
    )


async def read_all(redis: Any, keys: Keys, names: Sequence[str]) -> dict[str, BreakerStatus]:
    """Every named breaker's status, read concurrently (for ``saga top`` and metrics)."""
    script = load_script(redis, "breaker_status")
    found: dict[str, BreakerStatus] = {}

    async def read(name: str) -> None:
        reply = await script(keys=[keys.breaker(name), keys.breaker_failures(name)])
        found[name] = _decode(reply)

    async with anyio.create_task_group() as tg:
        for name in names:
            tg.start_soon(read, name)
    return {name: found[name] for name in names}
