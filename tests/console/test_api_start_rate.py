"""The start API's token buckets, with time as a parameter."""

from __future__ import annotations

import pytest

from saga.console.api_start_rate import RateLimiter


def test_a_burst_then_the_rate_with_the_wait_in_whole_seconds() -> None:
    """``burst`` requests pass at once, the next waits ceil(1/rate) s, then one a 1/rate."""
    r = RateLimiter(rate=0.5, burst=2)
    assert [r.take("a", 100.0) for _ in range(3)] == [0, 0, 2]
    assert r.take("a", 101.0) == 1  # half a request refilled: one second to go
    assert r.take("a", 102.0) == 0
    assert r.take("b", 102.0) == 0  # another caller has its own bucket


def test_a_bucket_refills_to_its_burst_and_no_further() -> None:
    """An idle caller gets its burst back, never more."""
    r = RateLimiter(rate=10, burst=3)
    assert [r.take("a", 0.0) for _ in range(3)] == [0, 0, 0]
    assert [r.take("a", 1000.0) for _ in range(4)] == [0, 0, 0, 1]


def test_bad_limits_are_refused() -> None:
    with pytest.raises(ValueError):
        RateLimiter(rate=0, burst=1)
