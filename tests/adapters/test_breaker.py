"""The shared circuit breaker against a real server: transitions, probe, status."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from structlog.testing import capture_logs

from saga.adapters.breaker import (
    BreakerPolicy,
    BreakerState,
    CircuitBreaker,
    read_all,
)
from saga.state.keys import Keys
from saga.steps.errors import CircuitOpenError

from .support import eventually

pytestmark = pytest.mark.anyio

FAST = BreakerPolicy(failures=3, window_s=5.0, cooldown_s=0.5, probe_ttl_s=5.0)


def make(redis: Any, keys: Keys, policy: BreakerPolicy = FAST, name: str = "llm") -> CircuitBreaker:
    return CircuitBreaker(redis, keys, name, policy)


async def trip(breaker: CircuitBreaker) -> None:
    for _ in range(breaker.policy.failures):
        await breaker.record_failure()


async def half_open(breaker: CircuitBreaker) -> None:
    async def check() -> bool:
        return (await breaker.state()).state is BreakerState.HALF_OPEN

    await eventually(check)


async def test_closed_until_k_failures(redis: Any, keys: Keys) -> None:
    """K-1 failures leave the circuit closed; the K-th opens it with a retry time."""
    breaker = make(redis, keys)
    for n in range(1, FAST.failures):
        await breaker.record_failure()
        status = await breaker.state()
        assert (status.state, status.failures) == (BreakerState.CLOSED, n)
        await breaker.before_call()
    with capture_logs() as logs:
        await breaker.record_failure()
    status = await breaker.state()
    assert status.state is BreakerState.OPEN
    assert status.opened_at is not None and status.retry_at is not None
    assert status.retry_at == pytest.approx(status.opened_at + FAST.cooldown_s, abs=0.01)
    assert [e["event"] for e in logs] == ["circuit_opened"]
    assert logs[0]["breaker"] == "llm"


async def test_open_refuses_with_retry_time(redis: Any, keys: Keys) -> None:
    """While open, before_call raises CircuitOpenError naming the dependency and retry time."""
    breaker = make(redis, keys)
    await trip(breaker)
    with pytest.raises(CircuitOpenError) as raised:
        await breaker.before_call()
    status = await breaker.state()
    assert raised.value.dependency == "llm"
    assert raised.value.retry_at == pytest.approx(status.retry_at)


async def test_failures_outside_window_do_not_open(redis: Any, keys: Keys) -> None:
    """Failures older than the window are forgotten: the circuit stays closed."""
    breaker = make(redis, keys, BreakerPolicy(failures=2, window_s=0.2, cooldown_s=1.0))
    await breaker.record_failure()

    async def forgotten() -> bool:
        return (await breaker.state()).failures == 0

    await eventually(forgotten)
    await breaker.record_failure()
    assert (await breaker.state()).state is BreakerState.CLOSED


async def test_half_open_after_cooldown_single_probe(redis: Any, keys: Keys) -> None:
    """After the cool-down one caller becomes the probe; a second is refused meanwhile."""
    breaker = make(redis, keys)
    other_executor = make(redis, keys)  # another process sees the same Redis state
    await trip(breaker)
    await half_open(breaker)
    with capture_logs() as logs:
        await breaker.before_call()
    assert [e["event"] for e in logs] == ["circuit_half_open"]
    with pytest.raises(CircuitOpenError) as raised:
        await other_executor.before_call()
    assert raised.value.retry_at > (await breaker.state()).opened_at  # type: ignore[operator]


async def test_callers_behind_a_probe_come_back_soon(redis: Any, keys: Keys) -> None:
    """While a probe is in flight, others are told to come back after the cool-down at
    most, not after the probe's whole lease: a quick probe must not park them for long."""
    import time

    slow_lease = BreakerPolicy(failures=3, window_s=5.0, cooldown_s=0.5, probe_ttl_s=120.0)
    breaker, other = make(redis, keys, slow_lease), make(redis, keys, slow_lease)
    await trip(breaker)
    await half_open(breaker)
    await breaker.before_call()  # the probe
    with pytest.raises(CircuitOpenError) as raised:
        await other.before_call()
    assert raised.value.retry_at - time.time() <= slow_lease.cooldown_s + 0.25


async def test_probe_success_closes(redis: Any, keys: Keys) -> None:
    """A successful probe closes the circuit and clears the failure count."""
    breaker = make(redis, keys)
    await trip(breaker)
    await half_open(breaker)
    await breaker.before_call()
    with capture_logs() as logs:
        await breaker.record_success()
    status = await breaker.state()
    assert (status.state, status.failures, status.retry_at) == (BreakerState.CLOSED, 0, None)
    assert [e["event"] for e in logs] == ["circuit_closed"]
    await breaker.before_call()
    await breaker.before_call()


async def test_probe_failure_reopens(redis: Any, keys: Keys) -> None:
    """A failed probe opens the circuit again for a fresh cool-down, and its caller is
    told the circuit is open (it parks instead of spending an attempt)."""
    breaker = make(redis, keys)
    await trip(breaker)
    first = await breaker.state()
    await half_open(breaker)
    await breaker.before_call()
    with capture_logs() as logs, pytest.raises(CircuitOpenError) as parked:
        await breaker.record_failure()
    status = await breaker.state()
    assert status.state is BreakerState.OPEN
    assert status.retry_at is not None and first.retry_at is not None
    assert status.retry_at > first.retry_at
    assert parked.value.retry_at == pytest.approx(status.retry_at)
    assert logs[0]["event"] == "circuit_opened" and logs[0]["probe_failed"] is True
    with pytest.raises(CircuitOpenError):
        await breaker.before_call()


async def test_a_failure_while_open_parks_its_caller(redis: Any, keys: Keys) -> None:
    """A call let through before the circuit opened, failing after, is told it is open."""
    breaker = make(redis, keys)
    await trip(breaker)
    with pytest.raises(CircuitOpenError):
        await breaker.record_failure()
    assert (await breaker.state()).state is BreakerState.OPEN


async def test_script_lost_by_the_server_runs_from_source(redis: Any, keys: Keys) -> None:
    """After SCRIPT FLUSH the breaker's scripts still run (EVAL of the source)."""
    breaker = make(redis, keys)
    await breaker.before_call()
    await redis.script_flush()
    await breaker.record_failure()
    assert (await breaker.state()).failures == 1


async def test_lost_probe_is_replaced_after_its_lease(redis: Any, keys: Keys) -> None:
    """A probe that never reports (its executor died) is replaced once its lease ends."""
    breaker = make(
        redis, keys, BreakerPolicy(failures=1, window_s=2, cooldown_s=0.1, probe_ttl_s=0.2)
    )
    await breaker.record_failure()
    await half_open(breaker)
    await breaker.before_call()  # this probe vanishes without reporting

    async def probe_granted() -> bool:
        try:
            await breaker.before_call()
        except CircuitOpenError:
            return False
        return True

    await eventually(probe_granted)


async def test_success_while_closed_changes_nothing(redis: Any, keys: Keys) -> None:
    """Successes in the closed state neither log nor reset the failure window."""
    breaker = make(redis, keys)
    await breaker.record_failure()
    with capture_logs() as logs:
        await breaker.record_success()
    assert logs == []
    assert (await breaker.state()).failures == 1


async def test_concurrent_callers_get_one_probe(redis: Any, keys: Keys) -> None:
    """Twenty concurrent callers after the cool-down: exactly one is let through."""
    breaker = make(redis, keys)
    await trip(breaker)
    await half_open(breaker)
    allowed: list[int] = []

    async def call(i: int) -> None:
        try:
            await breaker.before_call()
            allowed.append(i)
        except CircuitOpenError:
            pass

    async with anyio.create_task_group() as tg:
        for i in range(20):
            tg.start_soon(call, i)
    assert len(allowed) == 1


async def test_read_all_reports_each_breaker(redis: Any, keys: Keys) -> None:
    """read_all returns every named breaker, unknown ones as closed."""
    await trip(make(redis, keys, name="billing"))
    statuses = await read_all(redis, keys, ["llm", "billing"])
    assert list(statuses) == ["llm", "billing"]
    assert statuses["llm"].state is BreakerState.CLOSED
    assert statuses["billing"].state is BreakerState.OPEN
    assert statuses["billing"].failures == FAST.failures


def test_policy_rejects_nonsense() -> None:
    """A policy with zero failures or a non-positive duration is refused."""
    with pytest.raises(ValueError):
        BreakerPolicy(failures=0)
    with pytest.raises(ValueError):
        BreakerPolicy(cooldown_s=0)


def test_breaker_keys_share_one_cluster_slot(keys: Keys) -> None:
    """The breaker hash, failure log and probe key hash to one slot (one script, one slot)."""
    from redis.crc import key_slot

    names = [keys.breaker("llm"), keys.breaker_failures("llm"), keys.breaker_probe("llm")]
    assert len({key_slot(name.encode()) for name in names}) == 1
