"""The state machine of the maps model test (tests/state/test_stateful_map.py).

A hypothesis state machine holds a map (claim_items, commit_items, fail_items,
extend_item, promote_items with ``includes/map_items.lua``) against a small Python model.

Two records, x -> m (a map over x's list, 2 items open at once) -> j. Rules: start (with
0 to 4 items); x claimed and committed (its list); m's stream read and claimed (the
spawn, then items; claims are kept, so zombies and re-sent finishes are drawn too); a
recovery pass of another worker, or the controller's requeue, over m's idle pending
entries (a live item's lease is held, the rest dropped); a
commit or a failure (retry now, or for good) of any item claim ever issued, in any
order; the item retries promoted; a heartbeat of any claim; j claimed and committed;
cancel; an operator's retry from x (a new epoch). Every rule predicts the script's reply
from the model; after every rule the invariants below hold in Redis:

- the saga's state and step are the model's; while m runs the saga holds no token or
  entry, the map's counters and each item's state are the model's, and at most 2 items
  are open;
- j's ready stream has at most one entry per record and epoch: the fan-in fires once,
  and out:m then holds the items' outputs in item order;
- no item commits twice in one epoch ('committed' events per step, epoch and item).
"""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import TypeVar

from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    invariant,
    multiple,
    precondition,
    rule,
)

from saga.state import map_calls, operator, recovery
from saga.state.codes import RC
from saga.state.connection import connect
from saga.state.errors import LeaseLostError
from saga.state.keys import GROUP, Keys
from saga.state.machine import StateMachine
from saga.state.map_calls import MapPlan
from saga.state.model import Claim, FailAction
from saga.state.replies import text
from saga.state.requests import CommitRequest, FailRequest
from saga.state.requeue import idle_pending
from saga.state.streams import ensure_groups
from tests.state.helpers import history, keys_under, read_ready, stream_rows

T = TypeVar("T")
RECORDS = ("r0", "r1")
STEPS = ("x", "m", "j")
CONC = 2
FAR_MS = 600_000


@dataclass
class Rec:
    state: str = ""
    """'' (not started), pending, running, completed, failed, cancelled."""
    step: str = ""
    epoch: int = 0
    n: int = 0
    """Items of the current run (x's list)."""
    mi: dict[int, tuple[int, str]] = field(default_factory=dict)
    """Each item's (epoch, state letter) as the hash has it: p r w d f (an item waiting
    for its retry stays 'w' after the promotion, until its new entry is claimed)."""
    me: dict[int, str] = field(default_factory=dict)
    """Each running item's entry (the one its claim took)."""
    mt: dict[int, str] = field(default_factory=dict)
    """Each item's last token (its claim's; kept by its commit or failure)."""
    outs: dict[int, bytes] = field(default_factory=dict)
    spawned: bool = False
    next: int = 0
    open: int = 0
    done: int = 0
    failed: int = 0
    fanned: str = ""
    """out:m of the fan-in of the current epoch ("" before it)."""
    run: int = -1
    """The epoch of the map's last spawn (its items' epoch; -1 before any)."""
    undone: set[int] = field(default_factory=set)
    """Items of that run a compensation undid (stateful_map_undo.py)."""

    def at(self, i: int) -> str:
        e, s = self.mi.get(i, (-1, ""))
        return s if e == self.epoch else ""

    def mapping(self) -> bool:
        return self.state == "running" and self.step == "m"


class MapMachine(RuleBasedStateMachine):
    claims = Bundle("claims")
    policy = "fail"

    def __init__(self, url: str) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.client = connect(url)
        self.keys = Keys(prefix=f"m{uuid.uuid4().hex[:10]}")
        self.sm = StateMachine(self.client, self.keys)
        self.plan = MapPlan(over="x", next_step="j", concurrency=CONC, on_failure=self.policy)
        self.sm.maps["m"] = self.plan
        self.model = {rid: Rec() for rid in RECORDS}
        self.retries: set[tuple[str, int, int]] = set()
        """Members of the item retries zset: (record, item, epoch)."""
        self.run(ensure_groups(self.client, self.keys, STEPS))

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

    # -- the model's map --------------------------------------------------------
    def _release(self, m: Rec) -> None:
        while m.open < CONC and m.next < m.n:
            m.mi[m.next] = (m.epoch, "p")
            m.next, m.open = m.next + 1, m.open + 1

    def _ended(self, m: Rec) -> None:
        m.open -= 1
        self._release(m)
        if m.done + m.failed == m.n:
            outs = [m.outs[i] if m.at(i) == "d" else b"null" for i in range(m.n)]
            fanned = b"[" + b",".join(outs) + b"]"
            if self.policy == "partial":
                failed = ",".join(str(i) for i in range(m.n) if m.at(i) == "f")
                flag = b"true" if failed else b"false"
                fanned = b'{"results":%s,"partial":%s,"failed":[%s]}' % (
                    fanned, flag, failed.encode()
                )  # fmt: skip
            m.fanned, m.state, m.step = fanned.decode(), "pending", "j"

    def _live(self, m: Rec, c: Claim) -> bool:
        return (
            m.mapping() and c.epoch == m.epoch and m.at(c.item) == "r" and m.mt[c.item] == c.token
        )

    def _ended_as(self, m: Rec, c: Claim, letters: str) -> bool:
        """The claim's item ended with this token (a re-sent finish is a duplicate)."""
        e, s = m.mi.get(c.item, (-1, ""))
        return e == c.epoch and s in letters and m.mt.get(c.item) == c.token

    # -- rules ------------------------------------------------------------------
    @rule(rid=st.sampled_from(RECORDS), n=st.integers(0, 4))
    def start(self, rid: str, n: int) -> None:
        m = self.model[rid]
        if m.state:
            return
        res = self.run(self.sm.start(rid, "u1", "x", input_json=b'{"n":%d}' % n))
        m.state, m.step, m.epoch, m.n = "pending", "x", res.epoch, n

    def _at(self, step: str) -> bool:
        return any(m.state == "pending" and m.step == step for m in self.model.values())

    def _claim_plain(self, step: str, prev: str) -> list[Claim]:
        entries = self.run(read_ready(self.client, self.keys, step, "w-a", count=100))
        outs = self.run(self.sm.claim(step, 0, entries, worker="w-a", lease_ms=FAR_MS,
                                      max_lease_expiries=3, prev_step=prev))  # fmt: skip
        return [o.claim for o in outs if o.claim is not None]

    @precondition(lambda self: self._at("x"))
    @rule()
    def over(self) -> None:
        for c in self._claim_plain("x", "_input"):
            m = self.model[c.record_id]
            items = b"[" + b",".join(b'{"i":%d}' % i for i in range(m.n)) + b"]"
            out = self.run(self.sm.commit(c, CommitRequest(output=items, next_step="m")))
            assert (out.code, out.state) == (RC.OK, "pending"), out
            m.step, m.spawned = "m", False

    @precondition(lambda self: any(m.state for m in self.model.values()))
    @rule(target=claims)
    def claim(self) -> object:
        reply = self.run(self.client.xreadgroup(GROUP, "w-a", {self.keys.ready(0, "m"): ">"},
                                                count=100))  # fmt: skip
        rows = [(text(i), text(f[b"rid"]), text(f.get(b"i", b"")), int(f[b"ep"]))
                for _, got in reply or [] for i, f in got]  # fmt: skip
        outs = self.run(map_calls.claim_items(
            self.sm, "m", 0, rows, plan=self.plan, worker="w-a", lease_ms=FAR_MS,
            max_lease_expiries=3, op=uuid.uuid4().hex,
        ))  # fmt: skip
        got: list[Claim] = []
        for (entry, rid, item, ep), o in zip(rows, outs, strict=True):
            m = self.model[rid]
            if item == "":
                fresh = m.state == "pending" and m.step == "m" and ep == m.epoch and not m.spawned
                assert o.code == (RC.SPAWNED if fresh else RC.STALE_ENTRY), (o, m)
                if fresh:
                    m.state, m.spawned, m.run = "running", True, m.epoch
                    m.next = m.open = m.done = m.failed = 0
                    self._release(m)
                    if m.n == 0:
                        m.open = 1
                        self._ended(m)
                continue
            i = int(item)
            ok = m.mapping() and ep == m.epoch and m.at(i) in ("p", "w")
            assert o.code == (RC.OK if ok else RC.STALE_ENTRY), (o, rid, i, ep, m)
            if ok:
                assert o.claim is not None and o.claim.input == b'{"i":%d}' % i, o
                m.mi[i], m.mt[i], m.me[i] = (m.epoch, "r"), o.claim.token, entry
                got.append(o.claim)
        return multiple(*got)

    @rule(c=claims)
    def commit(self, c: Claim | None) -> None:
        if c is None:
            return
        m = self.model[c.record_id]
        output = b'{"by":"%s"}' % c.token.encode()
        out = self.run(self.sm.commit(c, CommitRequest(output=output)))
        if self._ended_as(m, c, "d"):
            assert out.code == RC.DUPLICATE, (out, m)
            return
        if not self._live(m, c):
            assert out.code == RC.LEASE_LOST, (out, m)
            return
        m.mi[c.item], m.outs[c.item], m.done = (m.epoch, "d"), output, m.done + 1
        m.undone.discard(c.item)
        self._ended(m)
        assert (out.code, out.state) == (RC.OK, m.state), (out, m)

    @rule(c=claims, dead=st.booleans())
    def fail(self, c: Claim | None, dead: bool) -> None:
        if c is None:
            return
        m = self.model[c.record_id]
        req = FailRequest(action=FailAction.DEAD if dead else FailAction.RETRY,
                          error_class="Boom", error_message="boom", delay_ms=0)  # fmt: skip
        out = self.run(self.sm.fail(c, req))
        if self._ended_as(m, c, "wf"):
            assert out.code == RC.DUPLICATE, (out, m)
            return
        if not self._live(m, c):
            assert out.code == RC.LEASE_LOST, (out, m)
            return
        if not dead:
            m.mi[c.item] = (m.epoch, "w")
            self.retries.add((c.record_id, c.item, m.epoch))
        elif self.policy == "partial":
            m.mi[c.item], m.failed = (m.epoch, "f"), m.failed + 1
            self._ended(m)
        else:
            m.mi[c.item] = (m.epoch, "f")
            self._failed_for_good(c.record_id, m)
        assert (out.code, out.state) == (RC.OK, m.state), (out, m)

    def _failed_for_good(self, rid: str, m: Rec) -> None:
        """An item failed for good under on_failure="fail": the saga is dead-lettered at
        the map (no step before it has a compensation here)."""
        m.state = "failed"

    @precondition(lambda self: any(m.state for m in self.model.values()))
    @rule()
    def promote(self) -> None:
        promoted = self.run(map_calls.promote_items(self.sm, "m", 0))
        assert promoted == len(self.retries), (promoted, self.retries)
        self.retries = set()  # each an entry now; the item waits ('w') until it is claimed

    @precondition(lambda self: any(m.state for m in self.model.values()))
    @rule()
    def recover(self) -> None:
        """Another worker's recovery pass takes the map's idle pending entries: a running
        item keeps its live lease; anything else is dropped."""
        rec = self.run(recovery.recover_idle(self.sm, "m", 0, worker="w-b", min_idle_ms=0))
        rows = [(e, text(f[b"rid"]), text(f.get(b"i", b"")), int(f[b"ep"]))
                for e, f in rec.entries]  # fmt: skip
        outs = self.run(map_calls.claim_items(
            self.sm, "m", 0, rows, plan=self.plan, worker="w-b", lease_ms=FAR_MS,
            max_lease_expiries=3, op=uuid.uuid4().hex,
        ))  # fmt: skip
        for (entry, rid, item, ep), o in zip(rows, outs, strict=True):
            m = self.model[rid]
            held = (item != "" and m.mapping() and ep == m.epoch and m.at(int(item)) == "r"
                    and m.me.get(int(item)) == entry)  # fmt: skip
            assert o.code == (RC.LEASE_HELD if held else RC.STALE_ENTRY), (o, rid, item, m)

    @precondition(lambda self: any(m.state for m in self.model.values()))
    @rule()
    def requeue(self) -> None:
        """The controller's requeue of the map's idle item entries: a running item keeps
        its live lease (and its entry); anything else is dropped."""
        idle = self.run(idle_pending(self.client, self.keys.ready(0, "m"), min_idle_ms=0))
        rows = [(e.entry_id, text(e.fields[b"rid"]), text(e.fields[b"i"]), int(e.fields[b"ep"]))
                for e in idle if e.fields and b"i" in e.fields]  # fmt: skip
        codes = self.run(map_calls.requeue_items(self.sm, "m", 0, rows, min_idle_ms=0))
        for (entry, rid, item, ep), code in zip(rows, codes, strict=True):
            m = self.model[rid]
            held = m.mapping() and ep == m.epoch and m.at(int(item)) == "r" and m.me.get(
                int(item)) == entry  # fmt: skip
            assert code == (RC.LEASE_HELD if held else RC.STALE_ENTRY), (code, rid, item, m)

    @rule(c=claims)
    def heartbeat(self, c: Claim | None) -> None:
        if c is None:
            return
        m = self.model[c.record_id]
        try:
            self.run(map_calls.extend_item(self.sm, c, worker="w-a", lease_ms=FAR_MS))
            extended = True
        except LeaseLostError:
            extended = False
        assert extended == self._live(m, c), (c, m)

    @precondition(lambda self: self._at("j"))
    @rule()
    def join(self) -> None:
        for c in self._claim_plain("j", "m"):
            m = self.model[c.record_id]
            assert c.input.decode() == m.fanned, (c.input, m)
            out = self.run(self.sm.commit(c, CommitRequest(output=b"{}", next_step="")))
            assert out.code == RC.OK
            m.state = "completed"

    @rule(rid=st.sampled_from(RECORDS))
    def cancel(self, rid: str) -> None:
        m = self.model[rid]
        if m.state in ("", "completed", "cancelled"):
            return
        self.run(operator.cancel(self.sm, rid))
        m.state = "cancelled"

    @rule(rid=st.sampled_from(RECORDS))
    def retry(self, rid: str) -> None:
        """An operator re-runs the saga from x (a new epoch)."""
        m = self.model[rid]
        if m.state not in ("failed", "cancelled"):
            return
        res = self.run(operator.retry(self.sm, rid, "x", "_input", steps=STEPS))
        m.state, m.step, m.epoch, m.fanned = "pending", "x", res.epoch, ""

    # -- invariants ---------------------------------------------------------------
    @invariant()
    def redis_agrees_with_the_model(self) -> None:
        self.run(self._check())

    async def _check(self) -> None:
        for rid, m in self.model.items():
            raw = await self.client.hgetall(self.keys.saga(rid))
            h = {text(k): text(v) for k, v in raw.items()}
            if not m.state:
                assert not h
                continue
            assert (h["state"], h["step"]) == (m.state, m.step), (rid, h, m)
            if m.mapping():
                assert h["token"] == "" and h["entry"] == "", h
                counters = f"{m.epoch} {m.n} {m.next} {m.open} {m.done} {m.failed}"
                assert h["map:m"] == counters, (h["map:m"], m)
                assert m.open <= CONC
            for i, (e, s) in m.mi.items():
                assert h[f"mi:m:{i}"] == f"{e}:{s}", (rid, i, h, m)
            if m.fanned and m.step == "j":
                assert h["out:m"] == m.fanned, (h["out:m"], m)
            hist = await history(self.client, self.keys, rid)
            commits = Counter((f["s"], f["ep"], f.get("i")) for f in hist
                              if f.get("e") == "committed")  # fmt: skip
            assert max(commits.values(), default=0) <= 1, commits  # exactly-once commits
            fans = Counter(f["ep"] for f in hist if f.get("e") == "fanned_in")
            assert max(fans.values(), default=0) <= 1, fans  # the fan-in fires once
        rows = await stream_rows(self.client, self.keys.ready(0, "j"))
        joins = [(f["rid"], f["ep"]) for _, f in rows]
        assert len(joins) == len(set(joins)), joins  # the next step is enqueued once


class PartialMapMachine(MapMachine):
    """The same, with on_failure="partial": an item failed for good is marked, the map
    goes on, and the fan-in names it."""

    policy = "partial"
