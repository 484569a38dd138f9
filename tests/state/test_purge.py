"""Erasure (state/purge.py): after purging a user, a walk of the whole keyspace (SCAN, every
value dumped by type) finds neither the user's id nor any of their record ids, while
another user's saga is untouched and the cost ledgers keep their amounts; an active
saga is refused until cancelled; a dry run writes nothing."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from saga.state import operator, recovery
from saga.state.budgets import Budget, set_budget
from saga.state.days import utc_day
from saga.state.keys import ERASED_USER, GROUP
from saga.state.machine import StateMachine
from saga.state.model import FailAction
from saga.state.purge import Purger, purge_user, work_of
from saga.state.reads import get_saga
from saga.state.replies import text
from saga.state.requests import CommitRequest, FailRequest
from saga.state.streams import ensure_groups
from tests.state.helpers import NEXT, STEPS, claim_next, snapshot

pytestmark = pytest.mark.anyio


async def dump_everything(client: Any) -> str:
    """Every key of the server and everything in it, as one text: names, hash fields and
    values, stream entries, set and sorted-set members, list items, strings."""
    parts: list[str] = []
    async for raw in client.scan_iter(count=1000):
        key = text(raw)
        kind = text(await client.type(key))
        if kind == "none":  # expired since SCAN listed it (another test's presence key)
            continue
        parts.append(key)
        if kind == "string":
            parts.append(repr(await client.get(key)))
        elif kind == "hash":
            parts += [f"{text(f)}={v!r}" for f, v in (await client.hgetall(key)).items()]
        elif kind == "stream":
            parts += [f"{text(i)} {f!r}" for i, f in await client.xrange(key)]
        elif kind == "zset":
            parts += [repr(m) for m in await client.zrange(key, 0, -1)]
        elif kind == "set":
            parts += [repr(m) for m in await client.smembers(key)]
        elif kind == "list":
            parts += [repr(m) for m in await client.lrange(key, 0, -1)]
        else:  # a type the walk does not know could hide an id: fail instead
            raise AssertionError(f"{key}: unexpected type {kind}")
    return "\n".join(parts)


class World:
    """One user's records in every state purge meets, another user's beside them."""

    def __init__(self, sm: StateMachine) -> None:
        tag = uuid.uuid4().hex[:8]
        self.sm, self.k = sm, sm.keys
        self.user, self.other = f"erasable-{tag}", f"keeper-{tag}"
        self.done, self.dead, self.stopped, self.busy = (
            f"rec-done-{tag}", f"rec-dead-{tag}", f"rec-stop-{tag}", f"rec-busy-{tag}")  # fmt: skip
        self.kept = f"kept-{tag}"

    async def build(self) -> None:
        sm, k = self.sm, self.k
        await ensure_groups(sm.client, k, STEPS)
        await set_budget(sm.client, k, self.user, Budget(daily=1.0, monthly=10.0))
        await sm.client.set(k.billing_key(self.user), b"sk-cached")
        # completed, with a paid cached LLM answer attributed by its commit, and an
        # embedding it used (the link the embedder writes, and the shared vector)
        await sm.start(self.done, self.user, "router", document=f"/data/{self.done}.pdf")
        answer = k.llm_cache(self.done, "parser", "e1-abc")
        await sm.client.set(answer, json.dumps({"cost": 0.25, "text": "x"}), ex=3600)
        vector = k.embedding("ab" * 8, "cd" * 16)
        await sm.client.set(vector, b"\x00\x01")
        await sm.client.sadd(k.derived(self.done), vector)
        for step in STEPS:
            c = await claim_next(sm, step, "w")
            keys = (answer,) if step == "parser" else ()
            req = CommitRequest(output=b'{"ok":1}', next_step=NEXT[step], cost_keys=keys,
                                cost=0.5, review="check" if step == "grouper" else "")  # fmt: skip
            await sm.commit(c, req)
        # failed at the router: a dead letter
        await sm.start(self.dead, self.user, "router")
        c = await claim_next(sm, "router", "w")
        await sm.fail(c, FailRequest(action=FailAction.DEAD, error_class="E", error_message="no"))
        # a malformed entry naming it, quarantined
        junk = (await sm.client.xadd(k.ready(0, "router"), {"rid": self.dead, "v": "x"})).decode()
        await sm.client.xreadgroup(GROUP, "w", {k.ready(0, "router"): ">"}, count=10)
        await recovery.quarantine(sm, "router", 0, junk, "bad", {b"rid": self.dead.encode()})
        # running: purge refuses it
        await sm.start(self.busy, self.user, "router")
        await claim_next(sm, "router", "w")
        # another user's saga
        await sm.start(self.kept, self.other, "router")
        c = await claim_next(sm, "router", "w")
        await sm.commit(c, CommitRequest(output=b"{}", next_step="parser", cost=0.125))
        # cancelled while pending: its ready entry is still undelivered; a stale deferral
        await sm.start(self.stopped, self.user, "router")
        await operator.cancel(sm, self.stopped)
        member = f"{self.user}|00000000000001|{self.stopped}|1"
        await sm.client.zadd(k.deferred(0, "parser"), {member: 0})
        # ... and stale priority listings (an urgent saga cancelled, a lowered entry)
        await sm.client.zadd(k.urgent(0, "router"), {self.stopped: 1})
        await sm.client.zadd(k.lowered(0, "router"), {f"{self.stopped}|1": 1})


def purger(sm: StateMachine) -> Purger:
    return Purger(sm.client, sm.keys, [*STEPS, *(f"undo:{s}" for s in STEPS)])


async def test_a_purged_user_is_found_nowhere_in_the_keyspace(sm: StateMachine) -> None:
    """Every record of the user, their budget, billing key and ledger fields are gone: no
    key name or value holds the user's or a record's id; the other user's saga is whole;
    the day's cost totals keep the amounts under the erased user."""
    w = World(sm)
    await w.build()
    k, day = sm.keys, utc_day()
    before_costs = await sm.client.hgetall(k.costs(0, day[0]))
    p = purger(sm)
    first = await purge_user(sm.client, [p], w.user, apply=True)
    refused = {r.record_id: r.refused for r in first.records if r.refused}
    assert list(refused) == [w.busy] and "cancel it first" in refused[w.busy]
    await operator.cancel(sm, w.busy)
    await purge_user(sm.client, [p], w.user, apply=True)

    everything = await dump_everything(sm.client)
    for needle in (w.user, w.done, w.dead, w.stopped, w.busy):
        assert needle not in everything, needle
    kept = await get_saga(sm.client, k, w.kept)
    assert (kept.user_id, kept.state, kept.step) == (w.other, "pending", "parser")
    after = {text(f): float(v) for f, v in (await sm.client.hgetall(k.costs(0, day[0]))).items()}
    total = sum(float(v) for f, v in before_costs.items() if not text(f).endswith("|n"))
    assert sum(v for f, v in after.items() if not f.endswith("|n")) == pytest.approx(total)
    assert after[f"{ERASED_USER}|parser"] == pytest.approx(0.75)  # its own 0.5 + the answer's
    assert after[f"{w.other}|router"] == pytest.approx(0.125)
    spend = {text(f) for f in await sm.client.hkeys(k.spend(0, day[1]))}
    assert ERASED_USER in spend and w.other in spend


async def test_a_record_purge_leaves_the_users_other_records(sm: StateMachine) -> None:
    """Purging one record erases that record only: the user's other sagas, budget and
    ledger fields stay; its own id is nowhere."""
    w = World(sm)
    await w.build()
    got = await purger(sm).record(w.dead, apply=True)
    # its dead letter, the quarantined entry, and its two (acknowledged) ready entries
    assert (got.state, got.refused, got.entries) == ("failed", "", 4)
    everything = await dump_everything(sm.client)
    assert w.dead not in everything
    assert w.done in everything and w.user in everything
    assert (await get_saga(sm.client, sm.keys, w.done)).state == "completed"


async def test_a_dry_run_writes_nothing_and_counts_what_would_go(sm: StateMachine) -> None:
    """Without apply, nothing changes in the keyspace; the report counts the traces."""
    w = World(sm)
    await w.build()
    before = await snapshot(sm.client, sm.keys.prefix)
    got = await purger(sm).record(w.done, apply=False)
    assert (got.keys, got.embeddings) == (4, 1)  # hash, history, embeddings link, answer
    report = await purge_user(sm.client, [purger(sm)], w.user, apply=False)
    assert {r.record_id for r in report.records} == {w.done, w.dead, w.stopped, w.busy}
    assert report.ledger_fields > 0 and report.user_keys == 2
    assert await snapshot(sm.client, sm.keys.prefix) == before


async def test_purge_looks_in_every_registered_step(sm: StateMachine) -> None:
    """The streams looked in: the type's registered steps and their undo steps."""
    await ensure_groups(sm.client, sm.keys, ["enricher"])  # besides the fixture's steps
    got = await work_of(sm.client, sm.keys)
    assert sorted(got) == sorted([*STEPS, "enricher", *(f"undo:{s}" for s in [*STEPS, "enricher"])])
