"""The watchdog: one loop that fires attempts' deadlines and starts their heartbeats."""

from __future__ import annotations

import asyncio

import pytest

from saga.worker.watchdog import Watchdog, Watched
from tests.executor.support import wait_until

pytestmark = pytest.mark.anyio


async def _never(_w: Watched) -> None:
    raise AssertionError("no heartbeat expected")


async def _run_forever() -> None:
    """A step that never ends by itself (it waits on an event nobody sets)."""
    await asyncio.Event().wait()


async def test_a_deadline_that_passes_cancels_the_step_with_timeout_error() -> None:
    dog = Watchdog(interval=0.01)
    runner = asyncio.get_running_loop().create_task(dog.run())
    now = asyncio.get_running_loop().time()
    w = Watched(now + 0.05, now + 60, _never)
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(5):  # the test's own deadline, should the watchdog fail
            async with asyncio.timeout(None) as w.timeout:
                dog.watch(w)
                await _run_forever()
    assert w.timeout.expired() and not w.lost  # it was the attempt's deadline that fired
    dog.close()
    await asyncio.wait_for(runner, 5)


async def test_heartbeats_start_after_their_delay_and_stop_with_the_step() -> None:
    dog = Watchdog(interval=0.01)
    runner = asyncio.get_running_loop().create_task(dog.run())
    beats = asyncio.Event()
    stopped = asyncio.Event()

    async def beat(_w: Watched) -> None:
        beats.set()
        try:
            await _run_forever()
        finally:
            stopped.set()

    now = asyncio.get_running_loop().time()
    w = Watched(now + 60, now + 0.02, beat)
    async with asyncio.timeout(None) as w.timeout:
        dog.watch(w)
        await asyncio.wait_for(beats.wait(), 5)
        w.stop()  # the step returned (as the attempt does)
        dog.unwatch(w)
    await asyncio.wait_for(stopped.wait(), 5)  # stop cancelled the heartbeat task
    dog.close()
    await asyncio.wait_for(runner, 5)


async def test_a_lost_lease_stops_the_step_at_once_and_says_so() -> None:
    dog = Watchdog(interval=3600)  # the loop never looks: lose() alone must stop the step

    async def lose(w: Watched) -> None:
        w.lose()

    now = asyncio.get_running_loop().time()
    w = Watched(now + 60, now, lose)
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(5):  # the test's own deadline
            async with asyncio.timeout(None) as w.timeout:
                dog.watch(w)
                w.check(asyncio.get_running_loop().time())  # starts the heartbeat task
                await _run_forever()
    assert w.lost and w.timeout.expired()


async def test_an_error_in_the_heartbeats_is_kept_for_the_attempt() -> None:
    async def broken(_w: Watched) -> None:
        raise ValueError("bad lease reply")

    now = asyncio.get_running_loop().time()
    w = Watched(now + 60, now, broken)
    async with asyncio.timeout(None) as w.timeout:
        w.check(asyncio.get_running_loop().time())

        async def failed() -> bool:
            return w.error is not None

        await wait_until(failed, within=5, what="the heartbeat error")
    assert isinstance(w.error, ValueError)


async def test_expiring_after_the_step_ended_is_harmless() -> None:
    now = asyncio.get_running_loop().time()
    w = Watched(now, now + 60, _never)
    async with asyncio.timeout(None) as w.timeout:  # noqa: ASYNC100 (the point: it has ended)
        pass
    w.lose()  # the timeout has exited: nothing to cancel, no error
    assert w.lost
