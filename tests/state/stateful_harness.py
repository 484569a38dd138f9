"""The stateful test's harness: one Redis keyspace, one event loop and the model per
run, cleaned up after it (the rules are in ``test_stateful``)."""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from collections.abc import Awaitable
from typing import TypeVar

from hypothesis.stateful import RuleBasedStateMachine

from saga.state.codes import RC
from saga.state.connection import connect
from saga.state.keys import Keys
from saga.state.machine import StateMachine
from saga.state.replies import text
from saga.state.streams import ensure_groups
from tests.state.helpers import keys_under
from tests.state.stateful_fairness import CAP, Fair
from tests.state.stateful_model import LEASE_MS, RECORDS, STEPS, UNDO_STEPS, UNDOABLE, Rec

T = TypeVar("T")


class RedisMachine(RuleBasedStateMachine):
    def __init__(self, url: str) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.client = connect(url)
        self.keys = Keys(prefix=f"h{uuid.uuid4().hex[:10]}")
        self.sm = StateMachine(self.client, self.keys)
        self.model = {rid: Rec() for rid in RECORDS}
        self.fair = Fair()
        self.committed: Counter[str] = Counter()
        """Commits of each step the model counted OK: the partition's 'committed:<step>'."""
        # Commits and fails hand a capped slot on (claims choose their cap per rule).
        self.sm.user_caps.update({step: (CAP, LEASE_MS) for step in STEPS})
        self.run(ensure_groups(self.client, self.keys, STEPS + UNDO_STEPS))

    def run(self, aw: Awaitable[T]) -> T:
        return self.loop.run_until_complete(aw)

    def teardown(self) -> None:
        try:
            stale = self.run(keys_under(self.client, self.keys.prefix))
            if stale:
                self.run(self.client.delete(*stale))
            self.run(self.client.aclose())
        finally:
            self.loop.close()

    def _entry_of(self, rid: str) -> str:
        return text(self.run(self.client.hget(self.keys.saga(rid), "entry")))

    def _after_claim(
        self, step: str, rid: str, code: RC, detail: str, undoable: tuple[str, ...], capped: bool
    ) -> str:
        """A dropped entry or a dead letter frees the saga's slot (capped claims); a dead
        letter with the steps to undo named compensates when one has its output stored.
        Returns what happened, for the run's statistics ("" when nothing more)."""
        m, note = self.model[rid], ""
        if capped and (code == RC.DEAD_LETTERED or (
                code == RC.STALE_ENTRY and not m.running(step))):  # fmt: skip
            note = f"claim {code.name}: freed {len(self.fair.free(step, rid))}"
        if code == RC.DEAD_LETTERED and undoable and any(s in m.outputs for s in UNDOABLE):
            m.begin_compensation(lambda: self._entry_of(rid))
            note = f"claim dead-lettered into {m.state.value}"
        if code == RC.DEAD_LETTERED and not step.startswith("undo:"):
            assert detail == m.state, (detail, m)  # failed, or compensating (compensated)
        return note

    async def _epochs(self, step: str, entries: list[tuple[str, str]]) -> list[int]:
        """Each entry's epoch ('ep'), as the claim script reads a released entry's."""
        ready = self.keys.ready(0, step)
        rows = [await self.client.xrange(ready, e, e) for e, _ in entries]
        return [int(r[0][1][b"ep"]) for r in rows]
