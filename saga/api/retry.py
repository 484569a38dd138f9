"""Pure decisions about a failed attempt: backoff and what happens next.

``now`` and the random source are parameters, so table tests need no clock.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from saga.state.model import FailAction
from saga.steps.errors import BudgetExceededError, CircuitOpenError, PermanentError


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How a step retries. Mirrors Temporal's RetryPolicy, in seconds."""

    max_attempts: int = 5
    """Attempts in all (the first one included) before dead-lettering."""
    base_s: float = 2.0
    """Delay after attempt n is ``min(2**n * base_s, cap_s)`` plus jitter."""
    cap_s: float = 300.0
    jitter: float = 0.1
    """Up to this fraction of the delay is added at random, to spread retries."""
    non_retryable: tuple[type[BaseException], ...] = field(default=())
    """Exception types that dead-letter at once besides PermanentError."""
    max_lease_expiries: int = 8
    """Attempts that may end by lease expiry (their worker died or stalled) before the
    saga is dead-lettered, counted apart from ``max_attempts``: a worker killed on the
    last allowed attempt does not dead-letter a healthy saga, and a record that crashes
    its executor every time still ends in the dead letters."""


def backoff_s(attempt: int, policy: RetryPolicy, rnd: random.Random | None = None) -> float:
    """``min(2^attempt * base, cap)`` seconds, plus up to ``jitter`` of it at random."""
    delay = min((2 ** max(attempt, 0)) * policy.base_s, policy.cap_s)
    r: float = (rnd or random).random()
    return float(delay + delay * policy.jitter * r)


@dataclass(frozen=True, slots=True)
class Decision:
    action: FailAction
    delay_ms: int
    error_class: str
    message: str


def decide(
    exc: BaseException,
    attempt: int,
    policy: RetryPolicy,
    *,
    now: float,
    rnd: random.Random | None = None,
) -> Decision:
    """What a failed attempt leads to.

    Permanent errors dead-letter at once; an open circuit parks the step until the
    breaker's retry time without spending the attempt, and a spent budget until the
    next budget period; anything else retries with
    backoff until ``max_attempts`` is spent, then dead-letters.
    """
    name = type(exc).__name__
    message = str(exc)[:500] or name
    if isinstance(exc, (PermanentError, *policy.non_retryable)):
        return Decision(FailAction.DEAD, 0, name, message)
    if isinstance(exc, (CircuitOpenError, BudgetExceededError)):
        delay = max(exc.retry_at - now, 0.0)
        return Decision(FailAction.PARK, int(delay * 1000), name, message)
    if attempt >= policy.max_attempts:
        final = f"{message} (gave up after {attempt} attempts)"
        return Decision(FailAction.DEAD, 0, name, final)
    return Decision(FailAction.RETRY, int(backoff_s(attempt, policy, rnd) * 1000), name, message)
