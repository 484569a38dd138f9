"""Retrying after connection loss, with tenacity: jittered exponential waits capped
at one second (at most about one reconnect a second), never a crash loop."""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import anyio
import tenacity

from saga.state.connection import TRANSIENT_ERRORS

T = TypeVar("T")


def resending(
    attempts: int | None = 5, on_retry: Callable[[BaseException], Any] | None = None
) -> tenacity.AsyncRetrying:
    """An AsyncRetrying that re-sends on transient Redis errors: ``attempts`` tries in
    all (None: until it works), waiting 50 ms doubling to 1 s, with jitter."""

    def before_sleep(state: tenacity.RetryCallState) -> None:
        if on_retry is not None and state.outcome is not None:
            exc = state.outcome.exception()
            if exc is not None:
                on_retry(exc)

    return tenacity.AsyncRetrying(
        retry=tenacity.retry_if_exception_type(TRANSIENT_ERRORS),
        wait=tenacity.wait_exponential_jitter(initial=0.05, max=1.0, jitter=0.05),
        stop=tenacity.stop_after_attempt(attempts) if attempts else tenacity.stop_never,
        before_sleep=before_sleep,
        reraise=True,
    )


async def resend(
    call: Callable[[], Awaitable[T]],
    attempts: int | None = 5,
    on_retry: Callable[[BaseException], Any] | None = None,
) -> T:
    """``call()`` once; only after a transient error, through ``resending``.

    The first try goes direct: building an AsyncRetrying costs ~20 µs, paid on
    every transition before this fast path (saga bench profile)."""
    try:
        return await call()
    except TRANSIENT_ERRORS as exc:
        if attempts == 1:
            raise
        if on_retry is not None:
            on_retry(exc)
    await anyio.sleep(random.uniform(0.05, 0.1))
    left = None if attempts is None else attempts - 1

    async def again() -> T:  # tenacity awaits only coroutine functions, not lambdas
        return await call()

    result: T = await resending(left, on_retry)(again)
    return result
