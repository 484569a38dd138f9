"""Per-token rate limits of the start API: a token bucket per caller, in this process.

Each token (by name) may make ``burst`` requests at once and ``rate`` a second after
that; over it, the request is refused with 429 and ``Retry-After`` (whole seconds
until a request would pass). ``now`` is a parameter, so the decisions are tested
without a clock. Buckets live in the console process: N console replicas let a token
through N times the rate (docs/sagas.md says so).
"""

from __future__ import annotations

import math

MAX_BUCKETS = 10_000
"""Buckets kept at most; the fullest (idle longest) are dropped first, which only ever
gives a caller more room, never less."""


class RateLimiter:
    def __init__(self, rate: float, burst: int) -> None:
        if rate <= 0 or burst < 1:
            raise ValueError("the rate must be positive and the burst at least 1")
        self.rate, self.burst = rate, burst
        self._buckets: dict[str, tuple[float, float]] = {}
        """caller -> (tokens left, when counted)"""

    def take(self, caller: str, now: float) -> int:
        """0 when ``caller`` may go on (one request is counted), else the seconds to wait."""
        left, at = self._buckets.get(caller, (float(self.burst), now))
        left = min(float(self.burst), left + max(0.0, now - at) * self.rate)
        if left < 1.0:
            self._buckets[caller] = (left, now)
            return max(1, math.ceil((1.0 - left) / self.rate))
        self._buckets[caller] = (left - 1.0, now)
        if len(self._buckets) > MAX_BUCKETS:
            self._forget(now)
        return 0

    def _forget(self, now: float) -> None:
        """Drop the buckets that refilled (their caller starts full again anyway)."""
        full = [c for c, (left, at) in self._buckets.items()
                if left + (now - at) * self.rate >= self.burst]  # fmt: skip
        for c in full[: max(1, len(self._buckets) - MAX_BUCKETS // 2)]:
            del self._buckets[c]
