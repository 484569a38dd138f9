"""Sends the commits and fails of attempts that finish close together in one pipeline.

Each stays its own atomic script; only the round trip is shared. A Redis outage
holds the batch and re-sends it (same op ids, so a repeat is harmless) until the
server is back: finished work is never dropped and never re-run because of it.
"""

from __future__ import annotations

import math
from typing import Any

import anyio
import structlog
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from saga.state.backoff import resending
from saga.state.machine import CommitRequest, FailRequest, Outcome, StateMachine
from saga.state.model import Claim

log = structlog.get_logger("saga.worker")


class _Pending:
    __slots__ = ("claim", "done", "error", "outcome", "req")

    def __init__(self, claim: Claim, req: CommitRequest | FailRequest) -> None:
        self.claim, self.req = claim, req
        self.done = anyio.Event()
        self.outcome: Outcome | None = None
        self.error: BaseException | None = None


class Committer:
    def __init__(self, sm: StateMachine, health: Any, max_batch: int = 100) -> None:
        self.sm = sm
        self.health = health
        self.max_batch = max_batch
        send, recv = anyio.create_memory_object_stream[_Pending](math.inf)
        self._send: MemoryObjectSendStream[_Pending] = send
        self._recv: MemoryObjectReceiveStream[_Pending] = recv
        self.batches = 0

    async def submit(self, claim: Claim, req: CommitRequest | FailRequest) -> Outcome:
        item = _Pending(claim, req)
        await self._send.send(item)
        await item.done.wait()
        if item.error is not None:
            raise item.error
        assert item.outcome is not None
        return item.outcome

    def close(self) -> None:
        """No more submissions; ``run`` returns once the queue is drained."""
        self._send.close()

    async def run(self) -> None:
        async with self._recv:
            async for first in self._recv:
                batch = [first]
                while len(batch) < self.max_batch:
                    try:
                        batch.append(self._recv.receive_nowait())
                    except (anyio.WouldBlock, anyio.EndOfStream):
                        break
                await self._flush(batch)

    async def _flush(self, batch: list[_Pending]) -> None:
        def deferred(exc: BaseException) -> None:
            self.health.redis_down(exc)
            log.warning("commit_deferred", error=type(exc).__name__, batch=len(batch))

        try:
            outcomes: list[Outcome] = await resending(attempts=None, on_retry=deferred)(
                self.sm.finish_many, [(p.claim, p.req) for p in batch]
            )
        except Exception as exc:  # a script error: surface it to each attempt
            for p in batch:
                p.error = exc
                p.done.set()
            return
        self.health.redis_up()
        self.batches += 1
        for p, outcome in zip(batch, outcomes, strict=True):
            p.outcome = outcome
            p.done.set()
