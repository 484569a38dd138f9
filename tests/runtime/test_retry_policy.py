"""Backoff and the failed-attempt decision are pure functions: table tests, no clock."""

from __future__ import annotations

import random

import pytest

from saga.api.retry import RetryPolicy, backoff_s, decide
from saga.state.model import FailAction
from saga.steps.errors import (
    CircuitOpenError,
    InvalidInputError,
    NotFoundError,
    PayloadTooLargeError,
    RetryableError,
    StepTimeoutError,
)


class _Zero(random.Random):
    def random(self) -> float:
        return 0.0


class _One(random.Random):
    def random(self) -> float:
        return 1.0


@pytest.mark.parametrize(
    ("attempt", "seconds"),
    [(0, 2), (1, 4), (2, 8), (3, 16), (6, 128), (7, 256), (8, 300), (20, 300)],
)
def test_backoff_is_min_of_doubling_and_cap(attempt: int, seconds: float) -> None:
    """Without jitter the delay is min(2^attempt * 2, 300) seconds."""
    assert backoff_s(attempt, RetryPolicy(), _Zero()) == seconds


def test_jitter_adds_at_most_its_fraction() -> None:
    """Jitter adds up to 10% of the delay, never less than the base delay."""
    assert backoff_s(3, RetryPolicy(), _One()) == pytest.approx(16 * 1.1)


@pytest.mark.parametrize(
    "exc", [NotFoundError("x"), InvalidInputError("x"), PayloadTooLargeError("pages", 9, 5)]
)
def test_permanent_errors_dead_letter_at_once(exc: Exception) -> None:
    """Not found, invalid input and payload too large go to the dead letters on attempt 1."""
    d = decide(exc, 1, RetryPolicy(), now=0, rnd=_Zero())
    assert d.action == FailAction.DEAD and d.error_class == type(exc).__name__


def test_other_errors_retry_until_max_attempts() -> None:
    """A plain exception retries with backoff, and dead-letters on the last attempt."""
    policy = RetryPolicy(max_attempts=3)
    first = decide(ValueError("boom"), 1, policy, now=0, rnd=_Zero())
    assert (first.action, first.delay_ms) == (FailAction.RETRY, 4000)
    assert decide(StepTimeoutError("slow"), 2, policy, now=0, rnd=_Zero()).action == "retry"
    last = decide(RetryableError("boom"), 3, policy, now=0, rnd=_Zero())
    assert last.action == FailAction.DEAD and "gave up after 3 attempts" in last.message


def test_open_circuit_parks_until_retry_time() -> None:
    """An open circuit parks the step until the breaker's retry time, on any attempt."""
    d = decide(CircuitOpenError("llm", retry_at=130.5), 5, RetryPolicy(max_attempts=5), now=100)
    assert (d.action, d.delay_ms) == (FailAction.PARK, 30_500)


def test_non_retryable_types_are_configurable() -> None:
    """A policy can name extra exception types that dead-letter at once."""
    policy = RetryPolicy(non_retryable=(KeyError,))
    assert decide(KeyError("k"), 1, policy, now=0).action == FailAction.DEAD
