"""Sends the commits and fails of attempts that finish close together in one pipeline.

Each stays its own atomic script; only the round trip is shared. While one batch
is on the wire the next one gathers, so the batch size follows the load. A Redis
outage holds the batch and re-sends it (same op ids, so a repeat is harmless)
until the server is back: finished work is never dropped and never re-run
because of it.

Plain asyncio futures, not anyio events and memory streams: this runs once per
step transition, and saga bench measured the anyio pair at ~8 µs of the worker's
CPU per transition against ~1 µs for a future.
"""

from __future__ import annotations

import asyncio
from typing import Any

import structlog

from saga.state.machine import CommitRequest, FailRequest, Outcome, StateMachine
from saga.state.model import Claim

log = structlog.get_logger("saga.worker")

_Item = tuple[Claim, CommitRequest | FailRequest, "asyncio.Future[Outcome]"]


class Committer:
    def __init__(self, sm: StateMachine, health: Any, max_batch: int = 100) -> None:
        self.sm = sm
        self.health = health
        self.max_batch = max_batch
        self._queue: list[_Item] = []
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
        while True:
            await self._wake.wait()
            self._wake.clear()
            while self._queue:
                batch = self._queue[: self.max_batch]
                del self._queue[: self.max_batch]
                await self._flush(batch)
            if self._closed:
                return

    async def _flush(self, batch: list[_Item]) -> None:
        def deferred(exc: BaseException) -> None:
            self.health.redis_down(exc)
            log.warning("commit_deferred", error=type(exc).__name__, batch=len(batch))

        try:
            outcomes = await self.sm.finish_many(
                [(c, r) for c, r, _ in batch], attempts=None, on_retry=deferred
            )
        except Exception as exc:  # a script error: surface it to each attempt
            for _, _, fut in batch:
                if not fut.done():
                    fut.set_exception(exc)
            return
        self.health.redis_up()
        self.batches += 1
        for (_, _, fut), outcome in zip(batch, outcomes, strict=True):
            if not fut.done():  # its attempt may have been cancelled by a drain
                fut.set_result(outcome)
