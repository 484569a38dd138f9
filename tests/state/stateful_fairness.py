"""The per-user cap in the stateful test's model (tests/state/test_stateful.py).

What the model knows of ``{p}:inflight:<step>`` (a user's slots: member
``<user>|<record>``, live or lapsed) and ``{p}:deferred:<step>`` (entries set aside,
by member ``<user>|<ms>|<record>|<epoch>``: the model learns a deferral's member from
Redis, as it learns a new entry id, and orders releases by it as ZRANGEBYLEX does).
Each method mirrors one piece of includes/user_cap.lua or claim_steps.lua.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tests.state.stateful_model import STEPS, UNDO_STEPS

CAP = 1
"""SAGA_USER_MAX_INFLIGHT of the run: one attempt per user and step while others wait."""
USERS = {"r0": "u-a", "r1": "u-a", "r2": "u-b"}
"""Two records of one user (so one can wait behind the other), one of another."""


def parse_member(member: str) -> tuple[str, str, int]:
    """A deferred member's (user, record, epoch)."""
    user, _ms, rid, epoch = member.split("|")
    return user, rid, int(epoch)


@dataclass
class Batch:
    """One claim call's view (claim_steps counts a user's slots once per batch)."""

    backlog: bool
    slots: dict[str, int] = field(default_factory=dict)


@dataclass
class Fair:
    inflight: dict[str, dict[str, bool]] = field(
        default_factory=lambda: {s: {} for s in STEPS + UNDO_STEPS}
    )
    """Step -> member -> live (its deadline not passed)."""
    deferred: dict[str, set[str]] = field(
        default_factory=lambda: {s: set() for s in STEPS + UNDO_STEPS}
    )

    def slots(self, step: str, user: str) -> int:
        """user_slots: the user's live slots; lapsed ones seen are dropped."""
        mine = {m: live for m, live in self.inflight[step].items() if m.startswith(user + "|")}
        for m, live in mine.items():
            if not live:
                del self.inflight[step][m]
        return sum(mine.values())

    def over_cap(self, step: str, rid: str, batch: Batch) -> bool:
        """claim_steps' over_cap for a pending saga's entry."""
        user = USERS[rid]
        if f"{user}|{rid}" in self.inflight[step]:
            return False  # its slot is reserved (a released entry) or still held
        if user not in batch.slots:
            batch.slots[user] = self.slots(step, user)
        return batch.slots[user] >= CAP and batch.backlog

    def claimed(self, step: str, rid: str, takeover: bool, batch: Batch) -> None:
        """A capped claim took (or kept) the slot."""
        user = USERS[rid]
        member = f"{user}|{rid}"
        if not takeover and member not in self.inflight[step] and user in batch.slots:
            batch.slots[user] += 1
        self.inflight[step][member] = True

    def _release_user(self, step: str, user: str, n: int) -> list[str]:
        mine = sorted(m for m in self.deferred[step] if m.startswith(user + "|"))[: max(n, 0)]
        for m in mine:
            self.deferred[step].discard(m)
            self.inflight[step][f"{user}|{parse_member(m)[1]}"] = True
        return mine

    def end_capped(self, step: str, rid: str) -> list[str]:
        """A commit or fail: its slot (if still there) goes to the user's oldest deferral."""
        user = USERS[rid]
        if self.inflight[step].pop(f"{user}|{rid}", None) is None:
            return []
        return self._release_user(step, user, 1)

    def free(self, step: str, rid: str) -> list[str]:
        """free_slot: the saga left its step otherwise (cancel, compensate, retry, a stale
        entry dropped by a capped claim): its slot goes, a live one to the oldest deferral."""
        user = USERS[rid]
        if not self.inflight[step].pop(f"{user}|{rid}", False):
            return []
        return self._release_user(step, user, 1)

    def release(self, step: str, cap: int, most: int, idle: bool) -> list[str]:
        """release_deferred.lua: per user (in order), as many as free slots allow."""
        out: list[str] = []
        for user in sorted({m.split("|")[0] for m in self.deferred[step]}):
            if len(out) >= most:
                break
            room = most - len(out)
            if cap > 0 and not idle:
                room = min(room, cap - self.slots(step, user))
            out += self._release_user(step, user, room)
        return out

    def lapse(self, step: str, rid: str) -> None:
        """Time passes for a running saga: its slot's deadline passes with its lease."""
        member = f"{USERS[rid]}|{rid}"
        if member in self.inflight[step]:
            self.inflight[step][member] = False

    def extend(self, step: str, rid: str) -> None:
        """A heartbeat (ZADD XX): a slot still there is live again."""
        member = f"{USERS[rid]}|{rid}"
        if member in self.inflight[step]:
            self.inflight[step][member] = True
