"""Sends the commits and fails of attempts that finish close together in one pipeline.

Each stays its own atomic script; only the round trip is shared. Up to
``max_in_flight`` batches are on the wire at once, and the next one gathers
meanwhile, so the batch size follows the load. One batch at a time made every
attempt wait for the batch before it as well as its own: its step slot was held
~10 ms a commit instead of ~6.5, and a worker ran ~15% fewer transitions at the
same concurrency (saga bench). Batches are independent (each attempt commits
once), so their order does not matter. A Redis outage holds every batch and
re-sends it (same op ids, so a repeat is harmless) until the server is back:
finished work is never dropped and never re-run because of it.

Plain asyncio futures, not anyio events and memory streams: this runs once per
step transition, and saga bench measured the anyio pair at ~8 µs of the worker's
CPU per transition against ~1 µs for a future.
"""

from __future__ import annotations

import asyncio
from typing import Any

import structlog

from saga.state.machine import StateMachine
from saga.state.model import Claim
from saga.state.requests import CommitRequest, FailRequest, Outcome

log = structlog.get_logger("saga.worker")

_Item = tuple[Claim, CommitRequest | FailRequest, "asyncio.Future[Outcome]"]


class Committer:
    def __init__(
        self, sm: StateMachine, health: Any, max_batch: int = 100, max_in_flight: int = 3
    ) -> None:
        self.sm = sm
        self.health = health
        self.max_batch = max_batch
        self.max_in_flight = max_in_flight
        self._queue: list[_Item] = []
        self._flights: set[asyncio.Task[None]] = set()
        self._wake = asyncio.Event()
        self._closed = False
        self.batches = 0

    def submit(self, claim: Claim, req: CommitRequest | FailRequest) -> asyncio.Future[Outcome]:
        """Queue one commit or fail; the future resolves to its outcome (or its error)."""
        if self._closed:
            raise RuntimeError("the committer is closed")
        fut: asyncio.Future[Outcome] = asyncio.get_running_loop().create_future()
        self._queue.append((claim, req, fut))
        self._wake.set()
        return fut

    def close(self) -> None:
        """No more submissions; ``run`` returns once the queue is drained."""
        self._closed = True
        self._wake.set()

    async def run(self) -> None:
        """Send batches until closed and everything queued is answered."""
        loop = asyncio.get_running_loop()
        try:
            while True:
                await self._wake.wait()
                self._wake.clear()
                while self._queue and len(self._flights) < self.max_in_flight:
                    batch = self._queue[: self.max_batch]
                    del self._queue[: self.max_batch]
                    flight = loop.create_task(self._flush(batch))
                    self._flights.add(flight)
                    flight.add_done_callback(self._landed)
                if self._closed and not self._queue and not self._flights:
                    return
        finally:
            for flight in list(self._flights):  # cancelled from outside: nothing left behind
                flight.cancel()

    def _landed(self, flight: asyncio.Task[None]) -> None:
        self._flights.discard(flight)
        self._wake.set()  # room for the next batch (or the end of a close)

    async def _flush(self, batch: list[_Item]) -> None:
        def deferred(exc: BaseException) -> None:
            self.health.redis_down(exc)
            log.warning("commit_deferred", error=type(exc).__name__, batch=len(batch))

        # Nothing but a cancellation leaves a flight: an error (a script's, or a
        # defect here) reaches every attempt of the batch, which then crashes loudly
        # and is recovered, instead of waiting forever on a future nobody resolves.
        try:
            outcomes = await self.sm.finish_many(
                [(c, r) for c, r, _ in batch], attempts=None, on_retry=deferred
            )
            self.health.redis_up()
            self.batches += 1
            for (_, _, fut), outcome in zip(batch, outcomes, strict=True):
                if not fut.done():  # its attempt may have been cancelled by a drain
                    fut.set_result(outcome)
        except Exception as exc:
            for _, _, fut in batch:
                if not fut.done():
                    fut.set_exception(exc)
