"""Every Lua transition touches one slot: the keys each call passes (the saga's hash,
history, pages, answer-cache keys, its partition's streams, indexes and counters) share
the partition's hash tag. Shown on a real cluster, where a call across slots would fail
with CROSSSLOT, and checked key by key with the cluster's own slot function."""

from __future__ import annotations

from typing import Any

import pytest
from redis.crc import key_slot

from saga.state import (
    budget_holds,
    budgets,
    map_calls,
    operator,
    recovery,
    requeue,
    retention,
    signals,
    streams,
)
from saga.state import review as review_store
from saga.state.budget_holds import HoldRequest
from saga.state.budgets import Budget
from saga.state.errors import StepConflictError
from saga.state.keys import GROUP, Keys
from saga.state.machine import StateMachine
from saga.state.map_calls import MapPlan
from saga.state.model import FailAction
from saga.state.purge import Purger, purge_user
from saga.state.repartition import Moved, move_record
from saga.state.requests import CommitRequest, FailRequest
from saga.state.scripts import SCRIPT_NAMES, load_all
from saga.state.streams import ensure_groups
from tests.cluster.support import start_sagas

pytestmark = pytest.mark.anyio


class Recording:
    """A cluster client that notes the keys of every script call, single or pipelined."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.calls: list[tuple[str, list[bytes]]] = []
        self._names = {s.sha: s.name for s in load_all().values()}

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def note(self, sha: str, numkeys: int, rest: tuple[Any, ...]) -> None:
        keys = [k if isinstance(k, bytes) else str(k).encode() for k in rest[:numkeys]]
        self.calls.append((self._names[sha], keys))

    async def evalsha(self, sha: str, numkeys: int, *rest: Any) -> Any:
        self.note(sha, numkeys, rest)
        return await self._client.evalsha(sha, numkeys, *rest)

    def pipeline(self, **kw: Any) -> Any:
        recording, pipe = self, self._client.pipeline(**kw)
        real = pipe.execute_command

        def execute_command(*args: Any, **kwargs: Any) -> Any:
            if args[0] == "EVALSHA":
                recording.note(args[1], args[2], args[3:])
            return real(*args, **kwargs)

        pipe.execute_command = execute_command
        return pipe


async def test_every_scripts_keys_hash_to_one_slot(client: Any, keys: Keys) -> None:
    """Every transition (SCRIPT_NAMES), run on the cluster: each call's KEYS are in one slot
    (a partition migration's two calls are in the old and the new partition's)."""
    rec = Recording(client)
    rids = ["s-commit", "s-retry", "s-dead", "s-cancel", "s-raw", "s-undo", "s-wait", "s-map"]
    sm = await start_sagas(client, keys, rids)
    sm = StateMachine(rec, keys)
    for rid in ("s-late",):
        await sm.start(rid, "u1", "router")
    by_rid = {}
    for p in keys.all_partitions():
        reply = await client.xreadgroup(GROUP, "w", {keys.ready(p, "router"): ">"}, count=100)
        pairs = [(i.decode(), f[b"rid"].decode()) for _, rows in reply or [] for i, f in rows]
        for out in await sm.claim(
            "router", p, pairs, worker="w", lease_ms=60_000, max_lease_expiries=3
        ):
            assert out.claim is not None
            by_rid[out.claim.record_id] = out.claim
    await sm.heartbeat(by_rid["s-commit"], worker="w", lease_ms=60_000)
    llm = keys.llm_cache("s-commit", "router", "e1-abc")
    c = by_rid["s-commit"]
    hold = HoldRequest(record_id=c.record_id, user_id=c.user_id, token=c.token, hold_id=llm,
                       usd=0.01, deadline_ms=c.lease_until_ms)  # fmt: skip
    await budget_holds.reserve(rec, keys, [keys], hold, Budget(daily=1.0), cluster=True)
    await client.set(llm, b'{"cost": 0.01}', ex=60)
    done = CommitRequest(output=b"{}", next_step="parser", worker="w", review="check",
                         cost_keys=(llm,))  # fmt: skip
    retry = FailRequest(action=FailAction.RETRY, error_class="E", error_message="x", delay_ms=1)
    dead = FailRequest(action=FailAction.DEAD, error_class="E", error_message="x")
    await sm.finish_many([(by_rid["s-commit"], done), (by_rid["s-retry"], retry),
                          (by_rid["s-dead"], dead)])  # fmt: skip
    p_retry = keys.partition_of("s-retry")
    await sm.promote("router", p_retry, ["s-retry"])
    await operator.retry(sm, "s-dead", "router", "_input", steps=("router", "parser"))
    await operator.cancel(sm, "s-cancel")
    await operator.accept_review(sm, "s-commit", ("router", "parser"))
    p_raw = keys.partition_of("s-raw")
    await recovery.recover_idle(sm, "router", p_raw, worker="w2", min_idle_ms=0)
    raw_id = by_rid["s-raw"].entry_id
    await recovery.quarantine(sm, "router", p_raw, raw_id, "test", {b"rid": b"s-raw"})
    gone = next(r for r in (f"gone-{i}" for i in range(99)) if keys.partition_of(r) == p_raw)
    await client.zadd(keys.retired(p_raw), {f"u1|{gone}": 0})
    await retention.prune_retired(sm, p_raw)
    await streams.prune_consumers(rec, keys.ready(p_raw, "router"), keep="w", idle_ms=0)
    p_late = keys.partition_of("s-late")
    late = await client.xrange(keys.ready(p_late, "router"), count=1)
    await requeue.requeue_idle(sm, "router", p_late, [(late[0][0].decode(), "s-late")],
                               min_idle_ms=0)  # fmt: skip
    await sm.release_deferred("router", p_raw, cap=1, lease_ms=60_000, most=10, idle=True)
    await budgets._unpark(sm, p_retry, "router", ["s-retry"], "budget raised", "op-u")
    await compensations(sm, keys, by_rid["s-undo"])
    await review_and_purge(sm, rec, keys)
    await waits(sm, keys, by_rid["s-wait"]), await schedules_and_lifecycle(sm, rec, keys)
    await lapse(rec, keys, p_raw, gone), await maps(sm, keys, by_rid["s-map"])
    wide = Keys(keys.prefix, 7)  # the cancelled saga moves to 7 partitions: two slots
    assert keys.partition_of("s-cancel") != wide.partition_of("s-cancel")
    assert await move_record(rec, keys, wide, "s-cancel", "op-1") == Moved.MOVED

    assert {name for name, _ in rec.calls} == set(SCRIPT_NAMES)
    for name, ks in rec.calls:
        slots = {key_slot(k) for k in ks}
        assert len(slots) == 1, (name, ks)
    assert len({key_slot(keys.ready(p, "router").encode()) for p in range(4)}) == 4


async def compensations(sm: StateMachine, keys: Keys, router_claim: Any) -> None:
    """Two sagas with a committed router compensated (compensate_saga); one undo
    committed (claim_undo, commit_undo), the other failed for a retry (fail_undo)."""
    done = CommitRequest(output=b"{}", next_step="parser", worker="w")
    assert (await sm.commit(router_claim, done)).code.name == "OK"
    await ensure_groups(sm.client, keys, ["undo:router"])
    undos = []
    for rid in ("s-undo", "s-commit"):
        await operator.compensate(sm, rid, ("router",))
        p = keys.partition_of(rid)
        ready = keys.ready(p, "undo:router")
        reply = await sm.client.xreadgroup(GROUP, "w", {ready: ">"}, count=10)
        pairs = [(i.decode(), f[b"rid"].decode()) for _, rows in reply or [] for i, f in rows]
        [out] = await sm.claim("undo:router", p, pairs, worker="w", lease_ms=60_000,
                               max_lease_expiries=3, prev_step="_input")  # fmt: skip
        assert out.claim is not None, out
        undos.append(out.claim)
    assert (await sm.commit(undos[0], CommitRequest(output=b"{}", worker="w"))).code.name == "OK"
    retry = FailRequest(action=FailAction.RETRY, error_class="E", error_message="x", delay_ms=1)
    assert (await sm.fail(undos[1], retry)).code.name == "OK"


def test_a_records_keys_share_its_partitions_slot() -> None:
    """Every per-record key (hash, history, pages, answer cache) is in the slot of its
    partition's streams and indexes, for any record id and partition count."""
    for partitions in (1, 4, 16, 1024):
        keys = Keys(prefix="saga", partitions=partitions)
        for rid in ("r", "mr-2024-0042", "x" * 64, "a:b", "p1@x=+"):
            p = keys.partition_of(rid)
            record = [keys.saga(rid), keys.history(rid), keys.pages(rid),
                      keys.llm_cache(rid, "parser", "e1-d")]  # fmt: skip
            partition = [keys.ready(p, "router"), keys.delayed(p, "router"),
                         keys.dead(p, "router"), keys.quarantine(p), keys.stats(p),
                         keys.costs(p, "2026-01-01"), keys.created_index(p),
                         keys.user_index(p, "u1"), keys.review_index(p), keys.retired(p),
                         *keys.state_indexes(p)]  # fmt: skip
            assert len({key_slot(k.encode()) for k in record + partition}) == 1, (rid, p)


async def review_and_purge(sm: StateMachine, rec: Recording, keys: Keys) -> None:
    """decide_review (on a saga with no review open), purge_record, forget_user_costs."""
    decision = review_store.Decision(step="parser", version=0, summary="s", decisions=b"{}",
                                     event=b"{}")  # fmt: skip
    with pytest.raises(StepConflictError):  # the script runs; the saga has no review open
        await review_store.decide(sm, "s-late", decision, actor="a")
    purger = Purger(rec, keys, ["router", "parser", "grouper", "undo:router"])
    await rec.hset(keys.spend(0, "2026-12"), "u-gone", "0.5")
    erased = await purge_user(rec, [purger], "u-gone", apply=True)
    assert erased.ledger_fields  # forget_user_costs ran on its ledger
    assert (await purger.record("s-none", apply=True, user_id="u1")).refused == ""


async def maps(sm: StateMachine, keys: Keys, claim: Any) -> None:
    """A map over the router's list of two items: its spawn and item claims
    (claim_items), a heartbeat (extend_item), the controller's requeue (requeue_items), a
    commit (commit_items), a failure for a retry (fail_items) and its promotion
    (promote_items)."""
    sm.maps["parser"] = MapPlan(over="router", next_step="grouper", concurrency=2)
    await sm.commit(claim, CommitRequest(output=b"[{}, {}]", next_step="parser", worker="w"))
    p = keys.partition_of(claim.record_id)
    items = []
    for _ in range(2):  # the map's own entry (the spawn), then its two items
        reply = await sm.client.xreadgroup(GROUP, "w", {keys.ready(p, "parser"): ">"}, count=10)
        rows = [(i.decode(), f[b"rid"].decode(), f.get(b"i", b"").decode(), int(f[b"ep"]))
                for _, got in reply or [] for i, f in got]  # fmt: skip
        outs = await map_calls.claim_items(sm, "parser", p, rows, plan=sm.maps["parser"],
                                           worker="w", lease_ms=60_000, max_lease_expiries=3,
                                           op="op-m")  # fmt: skip
        items += [o.claim for o in outs if o.claim is not None]
    assert [c.item for c in items] == [0, 1]
    await map_calls.extend_item(sm, items[0], worker="w", lease_ms=60_000)
    held = [(c.entry_id, c.record_id, str(c.item), c.epoch) for c in items]
    await map_calls.requeue_items(sm, "parser", p, held, min_idle_ms=0)  # leases live: held
    retry = FailRequest(action=FailAction.RETRY, error_class="E", error_message="x", delay_ms=0)
    await sm.finish_many([(items[0], CommitRequest(output=b"{}", worker="w")), (items[1], retry)])
    await map_calls.promote_items(sm, "parser", p)


async def waits(sm: StateMachine, keys: Keys, claim: Any) -> None:
    """A signal kept, a wait parked on the parser step, and its timer's sweep."""
    await signals.signal(sm, claim.record_id, "approved", signal_id="kept")
    await sm.commit(claim, CommitRequest(output=b"{}", next_step="parser", worker="w"))
    p = keys.partition_of(claim.record_id)
    reply = await sm.client.xreadgroup(GROUP, "w", {keys.ready(p, "parser"): ">"}, count=10)
    pairs = [(i.decode(), f[b"rid"].decode()) for _, rows in reply or [] for i, f in rows]
    wait = next(o.claim for o in await sm.claim(
        "parser", p, pairs, worker="w", lease_ms=60_000, max_lease_expiries=3
    ) if o.claim is not None)  # fmt: skip
    plan = signals.WaitPlan(event="other", next_step="grouper", due_ms=1, on_timeout="compensate")
    await signals.park(sm, wait, plan, worker="w")
    assert await signals.time_out_due(sm, p, 10**15) == {"compensate": 1}


async def lapse(rec: Recording, keys: Keys, p: int, gone: str) -> None:
    """lapse_holds on a hold whose attempt is gone."""
    await rec.zadd(keys.holds_due(p), {"gone-hold": 0})
    await rec.hset(keys.holds(p), "gone-hold", f"u1|0.5|1:1|{gone}")
    await budget_holds.lapse_holds(rec, keys, p)


async def schedules_and_lifecycle(sm: StateMachine, rec: Recording, keys: Keys) -> None:
    """A schedule's five scripts, release_lowered, and import/reseal (as saga import and
    saga keys rotate call them)."""
    from saga.state import schedules
    from saga.state.scripts import evalsha
    from tests.lifecycle.test_lifecycle_scripts import import_call

    d = schedules.ScheduleDefinition(cron="0 2 * * *", saga_type="documents", user_id="u1")
    await schedules.add(rec, keys, "nightly", d, 1000)
    await schedules.pause(rec, keys, "nightly")
    await schedules.resume(rec, keys, "nightly", 2000)
    await schedules.advance(rec, keys, "nightly", 2000, 3000, "nightly.x")
    await schedules.remove(rec, keys, "nightly")
    await StateMachine(rec, keys).release_lowered("router", 0)
    rid = next(r for r in (f"s-imp-{i}" for i in range(99)) if keys.partition_of(r) == 0)
    ks, args = import_call(keys, rid, "u1", True, ["1-1"])  # (its keys: partition 0's)
    await evalsha(rec, "import_record", ks, args)
    saga, hist = keys.saga(rid), keys.history(rid)
    await evalsha(rec, "reseal_values", [saga], ["hash", 1, "uid", "u1", "u1"])
    copy = ["copy", "1", 1, "1-1", 1, "e", "y"]
    await evalsha(rec, "reseal_stream", [hist, keys.reseal_scratch(hist)], copy)
