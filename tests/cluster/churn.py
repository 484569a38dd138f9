"""A steady stream of sagas against a cluster while something happens to it, and the
figures read back afterwards: sagas started, lost, committed twice, attempts re-run."""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import anyio

from saga.state.connection import TRANSIENT_ERRORS
from saga.state.errors import SagaNotFoundError
from saga.state.keys import Keys
from saga.state.machine import StateMachine
from saga.state.model import EventType, SagaState
from saga.state.reads import get_saga_and_history
from tests.cluster.support import STEPS
from tests.executor.support import Worker

RESEND_S = 60.0
"""How long a start is re-sent through transient errors: a failover takes seconds; a
cluster that refuses for a minute fails the test instead of hanging it."""


@dataclass
class Churn:
    """Starts ``slow-<s>-<n>`` sagas at ``rate`` a second until ``stop`` is set; a start
    counts as acknowledged once its call returned (re-sent on transient errors)."""

    sm: StateMachine
    rate: float = 25.0
    step_s: float = 0.02
    acked: list[str] = field(default_factory=list)
    ack_ms: dict[str, float] = field(default_factory=dict)
    start_errors: int = 0
    stop: anyio.Event = field(default_factory=anyio.Event)

    async def run(self) -> None:
        n = 0
        while not self.stop.is_set():
            rid = f"slow-{self.step_s}-{n:05d}"
            n += 1
            deadline = time.monotonic() + RESEND_S
            while True:
                try:
                    await self.sm.start(rid, "u1", "router")
                    break
                except TRANSIENT_ERRORS as exc:
                    self.start_errors += 1
                    if time.monotonic() > deadline:
                        raise AssertionError(f"{rid}: starts refused for {RESEND_S} s") from exc
                    await anyio.sleep(0.1)
            self.acked.append(rid)
            self.ack_ms[rid] = time.time() * 1000
            await anyio.sleep(1 / self.rate)


@dataclass
class Figures:
    started: int = 0
    completed: int = 0
    lost: list[str] = field(default_factory=list)
    double_commits: list[str] = field(default_factory=list)
    attempts_rerun: int = 0
    """Attempts recorded in the sagas beyond one per step."""
    executions_rerun: int = 0
    """Attempts the workers ran to an end beyond one per step (lost claims included)."""
    reclaimed: int = 0

    def line(self) -> str:
        return (
            f"started={self.started} completed={self.completed} lost={len(self.lost)} "
            f"double_commits={len(self.double_commits)} attempts_rerun={self.attempts_rerun} "
            f"executions_rerun={self.executions_rerun} reclaimed={self.reclaimed}"
        )


async def settled(client: Any, keys: Keys, rids: list[str]) -> bool:
    """Every saga that exists is completed (lost ones are counted by ``figures``)."""
    for rid in rids:
        try:
            saga, _ = await get_saga_and_history(client, keys, rid)
        except SagaNotFoundError:
            continue
        if saga.state != SagaState.COMPLETED:
            return False
    return True


async def figures(client: Any, keys: Keys, rids: list[str], workers: list[Worker]) -> Figures:
    f = Figures(started=len(rids))
    for rid in rids:
        try:
            saga, events = await get_saga_and_history(client, keys, rid)
        except SagaNotFoundError:
            f.lost.append(rid)
            continue
        f.completed += saga.state == SagaState.COMPLETED
        commits = Counter((e.step, e.epoch) for e in events if e.event == EventType.COMMITTED)
        if any(n > 1 for n in commits.values()):
            f.double_commits.append(rid)
        f.attempts_rerun += sum(saga.attempts.values()) - len(STEPS)
        f.reclaimed += sum(e.event == EventType.RECLAIMED for e in events)
    ended = ("step_committed", "step_failed", "lease_lost")
    ran = sum(1 for w in workers for e in w.events() if e.get("event") in ended)
    f.executions_rerun = ran - len(STEPS) * f.completed
    return f
