"""The invariants of the stateful test (tests/state/test_stateful.py), checked against Redis.

After every rule:
- at most one 'committed' event per (record, step, epoch);
- the history is a valid path through the transition table (stateful_model.TRANSITIONS),
  ending where the saga hash is;
- no entry is lost: a pending saga's entry is in its ready stream and not yet
  delivered, a running saga's entry is pending in the group, nothing else is pending;
  a waiting saga has its delayed-set member; a failed saga has its dead letter;
- a stale token never writes (checked in the commit/fail/heartbeat rules: only a
  'fenced' history event may appear; check_refusal, and a duplicate writes nothing);
- the state index sets agree with the hashes;
- compensation undoes only what is committed, each commit at most once, latest step first:
  walking the history, an undo commit names a step committed (and not undone) since, and
  the undo commits of one epoch go backwards through the pipeline;
- the per-user cap (check_fairness): the deferred and slot sets are the model's; a
  deferred saga (pending, no entry) waits on exactly one thing, its deferral or its
  released entry of its epoch, and a pending or running saga has no deferral of its epoch; no saga
  has two entries delivered at once. (Claims check that no user got a new slot past
  the cap while entries waited: stateful_harness._check_cap.)
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable
from typing import Any, TypeVar

from saga.state.codes import RC
from saga.state.history_codec import event_fields
from saga.state.keys import GROUP, Keys
from saga.state.model import SagaState
from saga.state.replies import text
from tests.state.helpers import SagaFields, snapshot
from tests.state.stateful_fairness import Fair, parse_member
from tests.state.stateful_model import (
    CD,
    CF,
    CG,
    RECORDS,
    SAME,
    STEPS,
    TRANSITIONS,
    UNDO_STEPS,
    UNDO_TRANSITIONS,
    WT,
    C,
    F,
    P,
    R,
    Rec,
    W,
)

T = TypeVar("T")


async def check_invariants(client: Any, keys: Keys, model: dict[str, Rec], fair: Fair) -> None:
    """Read every saga, history, stream and index set at once and check them all."""
    k = keys
    pipe = client.pipeline(transaction=False)
    for rid in RECORDS:
        pipe.hgetall(k.saga(rid))
        pipe.xrange(k.history(rid))
    pipe.time()
    for step in STEPS + UNDO_STEPS:
        pipe.xrange(k.ready(0, step))
        pipe.xpending_range(k.ready(0, step), GROUP, "-", "+", 1000)
        pipe.xinfo_groups(k.ready(0, step))
        pipe.zrange(k.delayed(0, step), 0, -1)
        pipe.xrange(k.dead(0, step))
        pipe.zrange(k.deferred(0, step), 0, -1)
        pipe.zrange(k.inflight(0, step), 0, -1, withscores=True)
    for state in SagaState:
        pipe.zrange(k.state_index(0, state), 0, -1)
    pipe.zrange(k.review_index(0), 0, -1)
    pipe.zrange(k.retired(0), 0, -1, withscores=True)
    pipe.zrange(k.waits(0), 0, -1, withscores=True)
    replies = iter(await pipe.execute())
    sagas, hists = {}, {}
    for rid in RECORDS:
        raw = next(replies)
        sagas[rid] = SagaFields({text(a): text(b) for a, b in raw.items()})
        hists[rid] = [
            {text(a): text(b) for a, b in event_fields(f).items()} for _, f in next(replies)
        ]
    streams, cap_sets = {}, {}
    secs, micros = next(replies)
    now = int(secs) * 1000 + int(micros) // 1000
    for step in STEPS + UNDO_STEPS:
        ready_rids = [(text(i), text(f[b"rid"]), int(f[b"ep"])) for i, f in next(replies)]
        ready = [i for i, _, _ in ready_rids]
        pel = {text(r["message_id"]) for r in next(replies)}
        last = text(next(replies)[0]["last-delivered-id"])
        delayed = {text(m) for m in next(replies)}
        dead = {text(i): {text(a): text(b) for a, b in f.items()} for i, f in next(replies)}
        streams[step] = (ready, pel, last, delayed, dead)
        deferred = {text(m) for m in next(replies)}
        inflight = {text(m): score > now for m, score in next(replies)}
        cap_sets[step] = (ready_rids, pel, last, deferred, inflight)
    index = {state: {text(m) for m in next(replies)} for state in SagaState}
    flagged = {text(m) for m in next(replies)}
    retired = {text(m): int(score) for m, score in next(replies)}
    check_timers(sagas, model, {text(m): int(score) for m, score in next(replies)})
    for rid in RECORDS:
        check_retention(rid, sagas[rid], retired)

    for rid in RECORDS:
        check_record(rid, model[rid], sagas[rid], hists[rid])
    check_streams(sagas, streams)
    for step, sets in cap_sets.items():
        check_fairness(step, sagas, sets, fair)
    for rid in RECORDS:
        current = sagas[rid].get("state")
        # By key: pending and running share one index ("active").
        keys_holding = {k.state_index(0, s) for s in SagaState if rid in index[s]}
        assert keys_holding == ({k.state_index(0, SagaState(current))} if current else set())
        # Review: the hash's rv:<step> fields are the model's, indexed while any is left.
        rv = {f[3:]: v for f, v in sagas[rid].items() if f.startswith("rv:")}
        assert rv == model[rid].review, (rid, rv, model[rid].review)
        assert (rid in flagged) == bool(rv)
        assert int(sagas[rid].get("rvv", 0)) == model[rid].rvv, (rid, model[rid].rvv)


def check_timers(
    sagas: dict[str, dict[str, str]], model: dict[str, Rec], waits: dict[str, int]
) -> None:
    """A saga waiting on a run-next-at timer has its member in the partition's waits, due
    at its 'due', with the 'resume' path and no entry; no other saga has one (but a stale
    member an operator's retry left, dropped by the sweep)."""
    for rid, h in sagas.items():
        if h.get("state") == WT:
            assert waits.get(rid) == int(h["due"]) > 0, (rid, "timer lost", h, waits)
            assert (h["wto"], h["wnext"], h["entry"]) == ("resume", h["step"], ""), (rid, h)
        elif rid in waits:
            assert model[rid].stale_timer, (rid, h.get("state"), "a timer outlived its wait")


def check_signals(rid: str, m: Rec, h: dict[str, str]) -> None:
    """The kept signals and remembered ids in the saga's hash are the model's."""
    if not h:
        return
    kept = {f[4:]: v for f, v in h.items() if f.startswith("sgi:")}
    assert kept == m.kept, (rid, kept, m.kept)
    assert {f[4:] for f in h if f.startswith("sig:")} == set(m.kept), (rid, h)
    assert int(h.get("nsk", 0)) == len(m.kept), (rid, h.get("nsk"), m.kept)
    assert {f[4:] for f in h if f.startswith("sid:")} == m.seen, (rid, m.seen)
    assert int(h.get("nsi", 0)) == len(m.seen), (rid, h.get("nsi"), m.seen)


def check_retention(rid: str, h: dict[str, str], retired: dict[str, int]) -> None:
    """A saga in a terminal state is due for deletion at its 'ret', in the retired set
    (whichever transition ended it); one that is not has no 'ret' (a stale member of a
    re-run saga may remain: the sweep drops it)."""
    if not h:
        return
    member = f"{h['uid']}|{rid}"
    if SagaState(h["state"]).terminal:
        assert h.get("ret"), (rid, h["state"], "ended without a retention")
        assert retired.get(member) == int(h["ret"]), (rid, h["state"], h["ret"], retired)
    else:
        assert not h.get("ret"), (rid, h["state"], "alive but due for deletion", h["ret"])


def check_record(rid: str, m: Rec, h: dict[str, str], hist: list[dict[str, str]]) -> None:
    if m.state is None:
        assert h == {} and hist == []
        return
    assert (h["state"], h["step"], int(h["epoch"]), h["token"]) == (
        m.state,
        m.step,
        m.epoch,
        m.token,
    )
    assert h["entry"] == m.entry
    check_signals(rid, m, h)
    committed = Counter((e["s"], e["ep"]) for e in hist if e["e"] == "committed")
    assert all(n == 1 for n in committed.values()), committed
    state, step, epoch = None, "", 0
    standing: set[str] = set()  # steps committed and not undone since
    undone_at: list[int] = []  # pipeline positions undone in this epoch, in order
    for ev in hist:
        undo = ev.get("s", "").startswith("undo:") and ev["e"] in UNDO_TRANSITIONS
        allowed_from, to = (UNDO_TRANSITIONS if undo else TRANSITIONS)[ev["e"]]
        assert state in allowed_from, f"{rid}: {ev['e']} after {state}: {hist}"
        if ev["e"] == "compensating":
            step, epoch, undone_at = ev["s"], int(ev["ep"]), []
            to = CG if ev["n"] else CD
            assert ev["n"] in ("", ev["s"])
        elif ev["e"] == "started":
            step, epoch = ev["s"], int(ev["ep"])
        elif ev["e"] == "retried":
            assert int(ev["ep"]) == epoch + 1
            step, epoch = ev["s"], epoch + 1
        elif ev["e"] == "review_completed" and ev["n"]:  # the next step re-runs
            assert int(ev["ep"]) == epoch + 1 and ev["s"] == ev["n"]
            step, epoch, to = ev["s"], epoch + 1, P
        elif ev["e"] != "fenced":  # a fenced event names the zombie's step
            assert ev["s"] == step, (ev, step)
            assert int(ev.get("ep", epoch)) == epoch, (ev, epoch)  # 'cancelled' has no ep
        if ev["e"] == "committed" and undo:
            name = ev["s"].removeprefix("undo:")
            assert name in standing, f"{rid}: {name} undone but not committed: {hist}"
            standing.discard(name)
            undone_at.append(STEPS.index(name))
            assert undone_at == sorted(undone_at, reverse=True), f"{rid}: undo order {hist}"
            step, to = (ev["n"], CG) if ev["n"] else (step, CD)
        elif ev["e"] == "committed":
            standing.add(ev["s"])
            step, to = (ev["n"], WT if ev.get("due") else P) if ev["n"] else (step, C)
        state = state if to is SAME else to
    if state == SagaState.PENDING and m.state == SagaState.RUNNING:
        state = m.state  # claimed since: a claim is in the saga hash, not the history
    assert (state, step, epoch) == (m.state, m.step, m.epoch)


def check_streams(sagas: dict[str, dict[str, str]], streams: dict[str, Any]) -> None:
    for step, (ready, pel, last, delayed, dead) in streams.items():
        at_step = {rid: dict(h) for rid, h in sagas.items() if h and h["step"] == step}
        # An undo step's compensating saga is running while it holds a token, waiting
        # while it has no entry, pending otherwise; compensation_failed is its failed.
        for h in at_step.values():
            if h["state"] == CG:
                h["state"] = R if h["token"] else (P if h["entry"] else W)
            elif h["state"] == CF:
                h["state"] = F
        running = {h["entry"] for h in at_step.values() if h["state"] == R}
        assert pel <= running, (step, pel, running)
        for entry in running - pel:  # requeued by the controller: waiting to be read again
            assert entry in ready and _id(entry) > _id(last), (step, "requeued entry lost", entry)
        for rid, h in at_step.items():
            if h["state"] == P and h["entry"]:  # no entry: deferred (check_fairness)
                assert h["entry"] in ready, (rid, "entry lost", h["entry"])
                assert _id(h["entry"]) > _id(last), (rid, "delivered but not claimed")
        assert delayed == {rid for rid, h in at_step.items() if h["state"] == W}
        failed = {h["dead_id"]: rid for rid, h in at_step.items() if h["state"] == F}
        assert set(dead) == set(failed), (step, dead, failed)
        for dead_id, rid in failed.items():
            assert dead[dead_id]["rid"] == rid


def check_fairness(step: str, sagas: dict[str, dict[str, str]], sets: Any, fair: Fair) -> None:
    """The per-user cap's sets agree with the model; a deferred saga is never lost nor
    running, and waits on exactly one thing; no saga is delivered twice at once."""
    ready_rids, pel, last, deferred, inflight = sets
    assert deferred == fair.deferred[step], (step, deferred, fair.deferred[step])
    assert inflight == fair.inflight[step], (step, inflight, fair.inflight[step])
    # A released entry of an older epoch is not its saga's (claims drop it): not a way.
    undelivered = Counter((rid, ep) for e, rid, ep in ready_rids if _id(e) > _id(last))
    delivered = Counter(rid for e, rid, _ in ready_rids if e in pel)
    assert all(n == 1 for n in delivered.values()), (step, "delivered twice", delivered)
    set_aside = Counter(parse_member(m)[1:] for m in deferred)
    for rid, h in sagas.items():
        if not h or h["step"] != step:
            continue
        current = set_aside[(rid, int(h["epoch"]))]
        if h["state"] == P and not h["entry"]:
            ways = current + undelivered[(rid, int(h["epoch"]))]
            assert ways == 1, (rid, step, "deferred saga waits on", ways, deferred, ready_rids)
        elif h["state"] in (P, R):  # (a cancelled one's release is dropped as stale)
            assert current == 0, (rid, step, h["state"], "also deferred", deferred)


async def check_refusal(
    client: Any, keys: Keys, rid: str, code: RC, before: dict[str, Any]
) -> None:
    """A duplicate writes nothing; a stale token writes nothing but one 'fenced' event
    (and the refusal's op id in the saga's 'fop', so a re-sent refusal writes none)."""
    if code == RC.OK:
        return
    after = await snapshot(client, keys.prefix)
    hist = keys.history(rid)
    changed = {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)}
    if code in (RC.DUPLICATE, RC.NOT_FOUND):  # (not found: the saga was pruned)
        assert changed == set()
        return
    saga = keys.saga(rid)
    assert changed <= {hist, saga} and hist in changed, changed
    if saga in changed:
        old_h, new_h = before[saga]["value"], after[saga]["value"]
        assert {k for k in old_h.keys() | new_h.keys() if old_h.get(k) != new_h.get(k)} == {"fop"}
    old, new = before[hist]["value"]["entries"], after[hist]["value"]["entries"]
    assert new[: len(old)] == old and len(new) == len(old) + 1
    assert new[-1][1]["e"] == "fenced"


async def unchanged(client: Any, keys: Keys, aw: Awaitable[T]) -> T:
    """Await ``aw`` (a resent call) and check it wrote nothing."""
    before = await snapshot(client, keys.prefix)
    result = await aw
    assert await snapshot(client, keys.prefix) == before
    return result


def _id(entry: str) -> tuple[int, int]:
    ms, _, seq = entry.partition("-")
    return int(ms), int(seq or 0)
