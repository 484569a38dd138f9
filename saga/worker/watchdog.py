"""Deadlines and heartbeats of every running attempt, kept by one loop per executor.

A timer per attempt for its deadline and another for its first heartbeat cost
~10% of the worker's CPU in saga bench (timer handles, heap pushes, cancelled
handles to sweep). Here an attempt registers a ``Watched`` and one loop looks
at all of them every ``interval`` seconds: it starts the heartbeats of those
running past a third of their lease and cancels those past their deadline.
Timeouts are therefore precise to ``interval`` (0.1 s), far below any step's
timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Coroutine
from typing import Any

BeatStarter = Callable[["Watched"], Coroutine[Any, Any, None]]


class Watched:
    """One attempt: its deadline (an asyncio timeout the watchdog can fire), when its
    heartbeats start, and whether a heartbeat found the lease taken."""

    __slots__ = ("_beats", "_start", "beat_at", "deadline_at", "error", "lost", "timeout")

    def __init__(self, deadline_at: float, beat_at: float, start_beats: BeatStarter) -> None:
        self.deadline_at = deadline_at
        self.beat_at: float | None = beat_at
        self._start = start_beats
        self._beats: asyncio.Task[None] | None = None
        self.timeout: asyncio.Timeout | None = None
        self.lost = False
        self.error: Exception | None = None
        """An error that stopped the heartbeats (not a lost lease, not a Redis outage)."""

    def check(self, now: float) -> None:
        if now >= self.deadline_at:
            self.expire()
        elif self.beat_at is not None and now >= self.beat_at:
            self.beat_at = None
            self._beats = asyncio.get_running_loop().create_task(self._run_beats())

    async def _run_beats(self) -> None:
        try:
            await self._start(self)
        except Exception as exc:
            self.error = exc

    def lose(self) -> None:
        """Stop the step now: its token is stale, whatever it does next is refused."""
        self.lost = True
        self.expire()

    def expire(self) -> None:
        t = self.timeout
        if t is not None and not t.expired():
            # RuntimeError: the step has just ended (its commit is fenced if the lease was lost).
            with contextlib.suppress(RuntimeError):
                t.reschedule(asyncio.get_running_loop().time())

    def stop(self) -> None:
        """The step has returned: no more heartbeats."""
        self.beat_at = None
        if self._beats is not None:
            self._beats.cancel()


class Watchdog:
    def __init__(self, interval: float = 0.1) -> None:
        self.interval = interval
        self._live: dict[int, Watched] = {}
        self._closed = False

    def watch(self, w: Watched) -> None:
        self._live[id(w)] = w

    def unwatch(self, w: Watched) -> None:
        self._live.pop(id(w), None)

    def close(self) -> None:
        """Stop ``run`` (after the last attempt has ended)."""
        self._closed = True

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        while not self._closed:
            await asyncio.sleep(self.interval)
            now = loop.time()
            for w in list(self._live.values()):
                w.check(now)
