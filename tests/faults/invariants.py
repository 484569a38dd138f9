"""The invariants every fault test ends with, and the summary row it reports.

Checked against Redis, the independent run log and the ready-stream poller:
- every saga is terminal (in the state the test expects, completed by default);
- at most one committed output per step per epoch, and a completed saga has every step
  committed in its last epoch, each executed at least once by the run log's count;
- the history is a valid path of the state machine (tests/state TRANSITIONS) ending where
  the saga hash is;
- no ready entry beyond what the history accounts for (no double enqueue);
- pending lists empty and lag 0 on every ready stream;
- every paid LLM answer charged exactly once.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

import msgspec

from saga.state.errors import SagaNotFoundError
from saga.state.keys import GROUP, Keys
from saga.state.model import EventType, HistoryEvent, Saga, SagaState
from saga.state.reads import get_saga_and_history
from saga.state.replies import text
from tests.faults.runlog import STEPS, RunLog
from tests.state.stateful_model import SAME, TRANSITIONS


@dataclass
class Tally:
    """What one fault test found: the columns of docs/reliability.md."""

    sagas: int = 0
    lost: int = 0
    double_commits: int = 0
    double_enqueues: int = 0
    double_charges: int = 0
    stuck: int = 0
    executions: int = 0
    reclaimed: int = 0
    problems: list[str] | None = None

    def problem(self, text_: str) -> None:
        self.problems = [*(self.problems or []), text_]


def path_problem(saga: Saga, events: list[HistoryEvent]) -> str:
    """'' if the history is a valid path of the transition table ending at the saga's
    state, step and epoch; else what is wrong."""
    state: SagaState | None = None
    step, epoch = "", 0
    for ev in events:
        allowed, to = TRANSITIONS[ev.event.value]
        if state not in allowed:
            return f"{ev.event} after {state}"
        if ev.event == EventType.STARTED:
            step, epoch = ev.step, ev.epoch
        elif ev.event == EventType.RETRIED:
            if ev.epoch != epoch + 1:
                return f"retried to epoch {ev.epoch} from {epoch}"
            step, epoch = ev.step, ev.epoch
        elif ev.event not in (EventType.FENCED, EventType.CANCELLED) and ev.step != step:
            return f"{ev.event} at {ev.step} while at {step}"
        if ev.event == EventType.COMMITTED:
            step, to = (
                (ev.next_step, SagaState.PENDING) if ev.next_step else (step, SagaState.COMPLETED)
            )
        state = state if to is SAME else to
    if (state, step, epoch) != (saga.state, saga.step, saga.epoch):
        return (
            f"history ends at {(state, step, epoch)}, hash at {(saga.state, saga.step, saga.epoch)}"
        )
    return ""


def expected_enqueues(events: list[HistoryEvent]) -> Counter[tuple[str, int]]:
    """(step, epoch) -> ready entries the history accounts for."""
    out: Counter[tuple[str, int]] = Counter()
    for ev in events:
        if ev.event in (EventType.STARTED, EventType.PROMOTED, EventType.RETRIED):
            out[(ev.step, ev.epoch)] += 1
        elif ev.event == EventType.COMMITTED and ev.next_step:
            out[(ev.next_step, ev.epoch)] += 1
    return out


def check_saga(
    t: Tally,
    saga: Saga,
    events: list[HistoryEvent],
    want: SagaState,
    runs: RunLog,
    enqueues: Counter[tuple[str, str, int]],
) -> None:
    rid = saga.record_id
    if not saga.state.terminal:
        t.stuck += 1
        t.problem(f"{rid} stuck in {saga.state} at {saga.step}")
    elif saga.state != want:
        t.lost += 1
        t.problem(
            f"{rid} ended {saga.state} ({saga.error_class}: {saga.error_message}), not {want}"
        )
    t.reclaimed += sum(1 for e in events if e.event == EventType.RECLAIMED)
    commits = Counter((e.step, e.epoch) for e in events if e.event == EventType.COMMITTED)
    t.double_commits += sum(n - 1 for n in commits.values())
    if saga.state == SagaState.COMPLETED:
        missing = [s for s in STEPS if commits[(s, saga.epoch)] != 1]
        if missing:
            t.problem(f"{rid} completed without one commit of {missing}")
    for (step, epoch), _ in commits.items():
        if runs.ended[(step, rid, epoch)] < 1:
            t.problem(f"{rid} committed {step} in epoch {epoch} but the run log never ran it")
    if problem := path_problem(saga, events):
        t.problem(f"{rid}: history not a valid path: {problem}")
    for (step, epoch), n in expected_enqueues(events).items():
        extra = enqueues[(step, rid, epoch)] - n
        if extra > 0:
            t.double_enqueues += extra
            t.problem(f"{rid}: {extra} extra ready entr(ies) at {step} epoch {epoch}")


async def check_streams(client: Any, keys: Keys, t: Tally) -> None:
    """Pending lists empty and lag 0 on every ready stream."""
    for step in STEPS:
        for p in keys.all_partitions():
            stream = keys.ready(p, step)
            if not await client.exists(stream):
                continue
            for g in await client.xinfo_groups(stream):
                if text(g["name"]) != GROUP:
                    continue
                if int(g["pending"]) or int(g.get("lag") or 0):
                    t.problem(f"{stream}: pending {g['pending']}, lag {g.get('lag')}")


async def check_costs(client: Any, keys: Keys, saga: Saga, t: Tally) -> None:
    """Every cached (paid) answer of the saga is attributed once, and the saga's cost is
    their sum."""
    pattern = keys.llm_cache(saga.record_id, "router", "x").rsplit(":", 2)[0] + ":*"
    answers = [msgspec.json.decode(await client.get(k)) async for k in client.scan_iter(pattern)]
    paid = sum(float(a.get("cost") or 0) for a in answers)
    unbilled = [a for a in answers if float(a.get("cost") or 0) and not a.get("by")]
    if unbilled or abs(paid - saga.total_cost) > 1e-9:
        t.double_charges += 1
        t.problem(
            f"{saga.record_id}: paid {paid}, charged {saga.total_cost}, unbilled {len(unbilled)}"
        )


async def check_all(
    client: Any,
    keys: Keys,
    rids: list[str],
    runs: RunLog,
    enqueues: Counter[tuple[str, str, int]],
    want: dict[str, SagaState] | None = None,
) -> Tally:
    mine = set(rids)
    t = Tally(sagas=len(rids), executions=sum(n for k, n in runs.runs.items() if k[1] in mine))
    for rid in rids:
        try:
            saga, events = await get_saga_and_history(client, keys, rid)
        except SagaNotFoundError:
            t.lost += 1
            t.problem(f"{rid}: saga gone")
            continue
        check_saga(t, saga, events, (want or {}).get(rid, SagaState.COMPLETED), runs, enqueues)
        if rid.startswith("llm-"):
            await check_costs(client, keys, saga, t)
    await check_streams(client, keys, t)
    return t
