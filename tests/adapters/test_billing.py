"""Billing keys over real HTTP, cached in a real Redis, with single-flight and a breaker."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import anyio
import pytest

from saga.adapters.billing import BillingClient, Secret
from saga.adapters.breaker import BreakerPolicy, BreakerState, CircuitBreaker
from saga.state.keys import Keys
from saga.steps.errors import CircuitOpenError, NotFoundError, PermanentError, RetryableError

from .support import Reply, Request, Stub, free_port, serve

pytestmark = pytest.mark.anyio

USERS = {"u1": "sk-user-one", "u2": "sk-user-two"}


def billing_handler(delay: float = 0.0) -> Any:
    def handler(request: Request) -> Reply:
        user = request.path.removeprefix("/users/").removesuffix("/key")
        if request.path == "/users/broken/key":
            return Reply(400, {"detail": "bad"})
        if request.path == "/users/flaky/key":
            return Reply(503, {"detail": "down"})
        if user in USERS:
            return Reply(200, {"key": USERS[user]}, delay)
        return Reply(404, {"detail": "no such user"})

    return handler


@pytest.fixture
def server() -> Iterator[Stub]:
    with serve(billing_handler(delay=0.2)) as stub:
        yield stub


@pytest.fixture
def breaker(redis: Any, keys: Keys) -> CircuitBreaker:
    return CircuitBreaker(
        redis, keys, "billing", BreakerPolicy(failures=3, window_s=5, cooldown_s=30)
    )


@pytest.fixture
async def billing(
    server: Stub, redis: Any, keys: Keys, breaker: CircuitBreaker
) -> AsyncIterator[BillingClient]:
    async with BillingClient(server.url, redis, keys, breaker, timeout_s=2.0) as client:
        yield client


async def test_miss_then_hit(billing: BillingClient, server: Stub, redis: Any, keys: Keys) -> None:
    """The first key_for fetches over HTTP and caches; the second is served from Redis."""
    assert (await billing.key_for("u1")).reveal() == "sk-user-one"
    assert (await billing.key_for("u1")).reveal() == "sk-user-one"
    assert server.count() == 1
    ttl = await redis.ttl(keys.billing_key("u1"))
    assert 24 * 3600 - 10 < ttl <= 24 * 3600
    assert not await redis.exists(keys.billing_lock("u1"))


async def test_single_flight_under_twenty_concurrent_calls(
    billing: BillingClient, server: Stub
) -> None:
    """Twenty concurrent key_for calls for one user make exactly one HTTP request."""
    got: list[Secret] = []

    async def one() -> None:
        got.append(await billing.key_for("u2"))

    async with anyio.create_task_group() as tg:
        for _ in range(20):
            tg.start_soon(one)
    assert [k.reveal() for k in got] == ["sk-user-two"] * 20
    assert server.count() == 1


async def test_invalidate_forces_a_refetch(billing: BillingClient, server: Stub) -> None:
    """After invalidate the next key_for goes back to the billing service."""
    await billing.key_for("u1")
    await billing.invalidate("u1")
    await billing.key_for("u1")
    assert server.count() == 2


async def test_unknown_user_is_not_found(billing: BillingClient) -> None:
    """A 404 from the billing service is a NotFoundError (permanent)."""
    with pytest.raises(NotFoundError):
        await billing.key_for("nobody")


async def test_other_4xx_is_permanent(billing: BillingClient, breaker: CircuitBreaker) -> None:
    """A 400 is a PermanentError and does not count against the breaker."""
    with pytest.raises(PermanentError):
        await billing.key_for("broken")
    assert (await breaker.state()).failures == 0


async def test_5xx_is_retryable_and_counted(
    billing: BillingClient, breaker: CircuitBreaker
) -> None:
    """A 503 is retryable and counts as a breaker failure."""
    with pytest.raises(RetryableError):
        await billing.key_for("flaky")
    assert (await breaker.state()).failures == 1


async def test_service_down_opens_the_breaker(
    redis: Any, keys: Keys, breaker: CircuitBreaker
) -> None:
    """Connection refused is retryable; K of them open the breaker, then no call is made."""
    url = f"http://127.0.0.1:{free_port()}"
    async with BillingClient(url, redis, keys, breaker, timeout_s=1.0) as client:
        for n in range(1, 4):
            with pytest.raises(RetryableError) as raised:
                await client.key_for("u1")
            assert "ConnectError" in str(raised.value)
            if n < 3:
                assert (await breaker.state()).failures == n
        assert (await breaker.state()).state is BreakerState.OPEN
        with pytest.raises(CircuitOpenError):
            await client.key_for("u1")
    assert not await redis.exists(keys.billing_lock("u1"))


async def test_timeout_is_retryable(redis: Any, keys: Keys, breaker: CircuitBreaker) -> None:
    """A billing service slower than the HTTP timeout is retryable and a breaker failure."""
    with serve(billing_handler(delay=1.0)) as slow:
        async with BillingClient(slow.url, redis, keys, breaker, timeout_s=0.2) as client:
            with pytest.raises(RetryableError):
                await client.key_for("u1")
    assert (await breaker.state()).failures == 1


async def test_key_never_in_reprs(billing: BillingClient) -> None:
    """The key shows in neither the Secret's repr/str nor formatted strings."""
    key = await billing.key_for("u1")
    for text in (repr(key), str(key), f"{key}", repr([key]), repr(billing)):
        assert "sk-user-one" not in text


async def test_waiter_takes_over_a_dead_holders_lock(
    server: Stub, redis: Any, keys: Keys, breaker: CircuitBreaker
) -> None:
    """A lock left by a crashed holder expires and a waiter fetches the key itself."""
    await redis.set(keys.billing_lock("u1"), "dead-executor", px=300)
    async with BillingClient(server.url, redis, keys, breaker, lock_ttl_s=0.3) as client:
        assert (await client.key_for("u1")).reveal() == "sk-user-one"
    assert server.count() == 1
