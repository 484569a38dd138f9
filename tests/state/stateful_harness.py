"""The stateful test's harness: one Redis keyspace, one event loop and the model per
run, cleaned up after it, and the claim every claiming rule goes through (the rules are
in ``test_stateful`` and its mixins, ``stateful_rules_*``)."""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import hypothesis
from hypothesis.stateful import Bundle, RuleBasedStateMachine

from saga.state.codes import RC
from saga.state.connection import connect
from saga.state.keys import Keys
from saga.state.machine import StateMachine
from saga.state.model import Claim, SagaState
from saga.state.replies import ClaimOutcome, text
from saga.state.streams import ensure_groups
from tests.state.helpers import keys_under
from tests.state.stateful_fairness import CAP, USERS, Batch, Fair, parse_member
from tests.state.stateful_model import (
    LEASE_MS,
    MAX_LEASE_EXPIRIES,
    PREV,
    RECORDS,
    STEPS,
    UNDO_STEPS,
    UNDOABLE,
    R,
    Rec,
)

T = TypeVar("T")
ClaimWith = Callable[[dict[str, Any]], Awaitable[list[ClaimOutcome]]]
"""A claim other than sm.claim's, given the claim's options (claiming in the read)."""

event = hypothesis.event
"""Every rule module calls ``event`` through this one attribute: a scripted run outside
hypothesis (test_stateful_mutants, test_stateful_cap_paths) silences them all by patching
it here."""

CLAIMS = Bundle("claims")
"""The claims issued (zombies included): the bundle commit, fail and heartbeat draw from."""

WORK = STEPS + UNDO_STEPS
"""Every stream a worker reads: the steps and the undo steps."""


def _prev(step: str) -> str:
    return PREV[step.removeprefix("undo:")]


class RedisMachine(RuleBasedStateMachine):
    claims = CLAIMS

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

    def _in(self, *states: SagaState) -> bool:
        return any(m.state in states for m in self.model.values())

    def _claim(
        self, step: str, entries: list[tuple[str, str]], worker: str, via: str,
        capped: bool = False, compensable: bool = False,
        claim_with: ClaimWith | None = None, backlog: bool | None = None,
    ) -> list[tuple[str, Claim]]:  # fmt: skip
        """Claim ``entries`` (read already; or, with ``claim_with``, about to be read by
        the claim itself, ``backlog`` saying whether more wait behind them) and check
        every reply against the model."""
        if not entries:
            return []
        capped = capped and not step.startswith("undo:")  # claim_undo has no user cap
        undoable = UNDOABLE if compensable and not step.startswith("undo:") else ()
        if capped:
            batch = Batch(backlog=self.run(self._backlog(step)) if backlog is None else backlog)
        else:
            batch = None
        before = self.run(self._cap_sets(step))
        eps = self.run(self._epochs(step, entries))
        options: dict[str, Any] = {
            "worker": worker, "lease_ms": LEASE_MS, "max_lease_expiries": MAX_LEASE_EXPIRIES,
            "prev_step": _prev(step), "user_cap": CAP if capped else 0, "undoable": undoable,
        }  # fmt: skip
        if claim_with is not None:
            outs = self.run(claim_with(options))
        else:
            outs = self.run(self.sm.claim(step, 0, entries, **options))
        issued, deferred, takeovers = [], [], Counter[str]()
        for (entry, rid), ep, out in zip(entries, eps, outs, strict=True):
            m = self.model[rid]
            takeover = m.state == R
            if batch is not None and m.waits_for(step, entry, ep) and m.dfr != entry and (
                self.fair.over_cap(step, rid, batch)
            ):  # fmt: skip
                m.defer(entry)
                expected = RC.DEFERRED
                deferred.append((USERS[rid], rid, m.epoch))
            else:
                expected = m.predict_claim(step, entry, ep)
            assert out.code == expected, (rid, entry, out, m)
            event(f"claim via {via}: {expected.name}")
            note = self._after_claim(step, rid, expected, out.detail, undoable, batch is not None)
            if note:
                event(note)
            if out.claim is not None:
                assert out.claim.token == m.token
                assert out.claim.attempt == m.attempts_at(step)
                assert out.claim.expired == m.expiries_at(step)
                if step.startswith("undo:"):  # the plan: latest step first, none twice
                    assert out.claim.extra["undo"].decode() == ",".join(m.plan)
                issued.append((worker, out.claim))
                if batch is not None:
                    self.fair.claimed(step, rid, takeover, batch)
                    takeovers[USERS[rid]] += takeover
        if batch is not None:
            self._check_cap(step, before, deferred, batch.backlog, takeovers)
        return issued

    async def _backlog(self, step: str) -> bool:
        """Entries wait undelivered in the stream (found apart from the group's lag)."""
        ready = self.keys.ready(0, step)
        last = text((await self.client.xinfo_groups(ready))[0]["last-delivered-id"])
        return bool(await self.client.xrange(ready, f"({last}", "+", count=1))

    async def _cap_sets(self, step: str) -> tuple[set[str], Counter[str]]:
        """The deferred members, and the live slots per user."""
        deferred = await self.client.zrange(self.keys.deferred(0, step), 0, -1)
        slots = await self.client.zrange(self.keys.inflight(0, step), 0, -1, withscores=True)
        secs, micros = await self.client.time()
        now = int(secs) * 1000 + int(micros) // 1000
        live = Counter(text(m).split("|")[0] for m, score in slots if score > now)
        return {text(m) for m in deferred}, live

    def _check_cap(
        self, step: str, before: tuple[set[str], Counter[str]],
        deferred: list[tuple[str, str, int]], backlog: bool, takeovers: Counter[str],
    ) -> None:  # fmt: skip
        """The deferrals the model predicted are the members Redis added (the model takes
        them); while entries waited, no user got a new slot past the cap (a takeover
        carries on an attempt: not a new one)."""
        (old, live_before), (now, live_after) = before, self.run(self._cap_sets(step))
        added = now - old
        assert sorted(parse_member(m) for m in added) == sorted(deferred), (added, deferred)
        self.fair.deferred[step] |= added
        if backlog:
            for user, n in live_after.items():
                assert n - takeovers[user] <= max(CAP, live_before[user]), (user, step, n)

    def _after_claim(
        self, step: str, rid: str, code: RC, detail: str, undoable: tuple[str, ...], capped: bool
    ) -> str:
        """A dropped entry (stale, or its saga gone) or a dead letter frees the saga's slot
        (capped claims); a dead
        letter with the steps to undo named compensates when one has its output stored.
        Returns what happened, for the run's statistics ("" when nothing more)."""
        m, note = self.model[rid], ""
        if capped and (code == RC.DEAD_LETTERED or (
                code == RC.STALE_ENTRY and not m.running(step))):  # fmt: skip
            note = f"claim {code.name}: freed {len(self.fair.free(step, rid))}"
        if capped and code == RC.NOT_FOUND:  # the saga pruned: its slot found by record
            note = f"claim NOT_FOUND: freed {len(self.fair.free(step, rid))}"
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
