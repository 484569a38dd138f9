"""Per-user LLM budgets: stored in one hash, checked against the spend counters that
commit and fail keep per partition and month (``Keys.spend``), and the wake-up of a
user's budget-parked sagas (of every saga type) when their budget is raised or cleared.

The check is ``over_budget`` (a pure function); the read behind it is ``spend_of``,
one pipeline for every partition and saga type.
"""

from __future__ import annotations

import calendar
import itertools
import time
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import msgspec

from saga.state.errors import InvalidIdError
from saga.state.ids import validate_id
from saga.state.keys import Keys
from saga.state.machine import StateMachine, new_op
from saga.state.model import SagaState
from saga.state.replies import num, text
from saga.state.scripts import evalsha

BUDGET_ERROR = "BudgetExceededError"
"""The error class a budget-parked saga carries (``saga.steps.errors``)."""


class Budget(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A user's LLM budget in USD per UTC day and per UTC month; None: no limit."""

    daily: float | None = None
    monthly: float | None = None

    def __post_init__(self) -> None:
        for name, value in (("daily", self.daily), ("monthly", self.monthly)):
            if value is not None and not (0 <= value < 1e9):
                raise InvalidIdError(f"a {name} budget must be between 0 and 1e9 USD")


class Spend(msgspec.Struct, frozen=True):
    day: float = 0.0
    month: float = 0.0


class Exceeded(msgspec.Struct, frozen=True):
    period: str
    """``daily`` or ``monthly``: the period whose budget is spent (monthly if both)."""
    spent: float
    limit: float
    resumes_at: float
    """Epoch seconds: the start of the next period, when the parked steps run again."""


_encode = msgspec.json.Encoder()
_decode = msgspec.json.Decoder(Budget)


def decode(raw: bytes | str) -> Budget:
    return _decode.decode(raw)


def utc_period(now: float) -> tuple[str, str, str]:
    """(``yyyy-mm``, ``dd``, ``yyyy-mm-dd``) of ``now`` in UTC."""
    day = time.strftime("%Y-%m-%d", time.gmtime(now))
    return day[:7], day[8:], day


def next_day(now: float) -> float:
    return (now // 86400 + 1) * 86400


def next_month(now: float) -> float:
    t = time.gmtime(now)
    year, month = (t.tm_year + 1, 1) if t.tm_mon == 12 else (t.tm_year, t.tm_mon + 1)
    return float(calendar.timegm((year, month, 1, 0, 0, 0)))


def over_budget(budget: Budget | None, spend: Spend, now: float) -> Exceeded | None:
    """Which budget ``spend`` has reached, if any: the monthly one first (it lasts longer)."""
    if budget is None:
        return None
    if budget.monthly is not None and spend.month >= budget.monthly:
        return Exceeded("monthly", spend.month, budget.monthly, next_month(now))
    if budget.daily is not None and spend.day >= budget.daily:
        return Exceeded("daily", spend.day, budget.daily, next_day(now))
    return None


async def set_budget(client: Any, keys: Keys, user_id: str, budget: Budget) -> None:
    await client.hset(keys.budgets(), validate_id(user_id, "user id"), _encode.encode(budget))


async def clear_budget(client: Any, keys: Keys, user_id: str) -> bool:
    """Remove a user's budget; False when they had none."""
    return bool(await client.hdel(keys.budgets(), validate_id(user_id, "user id")))


async def any_budgets(client: Any, keys: Keys) -> bool:
    return bool(await client.hlen(keys.budgets()))


async def budgets(client: Any, keys: Keys, user_id: str | None = None) -> dict[str, Budget]:
    """Every user's budget, or only ``user_id``'s (empty when they have none)."""
    if user_id is not None:
        raw = await client.hget(keys.budgets(), validate_id(user_id, "user id"))
        return {user_id: _decode.decode(raw)} if raw is not None else {}
    found = await client.hgetall(keys.budgets())
    return {text(u): _decode.decode(v) for u, v in sorted(found.items())}


def spend_pipeline(pipe: Any, keyspaces: Sequence[Keys], user_id: str, now: float) -> int:
    """Queue the reads of a user's spend (one HMGET per partition and type); returns how
    many replies ``sum_spend`` takes."""
    month, dd, _ = utc_period(now)
    n = 0
    for keys in keyspaces:
        for p in keys.all_partitions():
            pipe.hmget(keys.spend(p, month), [user_id, f"{user_id}|{dd}"])
            n += 1
    return n


def sum_spend(replies: Sequence[Any]) -> Spend:
    day = month = 0.0
    for m, d in replies:
        month += float(m) if m else 0.0
        day += float(d) if d else 0.0
    return Spend(round(day, 9), round(month, 9))


async def spend_of(
    client: Any, keyspaces: Sequence[Keys], user_ids: Sequence[str], now: float
) -> dict[str, Spend]:
    """Each user's spend of today and this month (UTC), in one round trip."""
    pipe = client.pipeline(transaction=False)
    counts = [spend_pipeline(pipe, keyspaces, u, now) for u in user_ids]
    replies = await pipe.execute()
    out, at = {}, 0
    for u, n in zip(user_ids, counts, strict=True):
        out[u] = sum_spend(replies[at : at + n])
        at += n
    return out


def parked_for_budget(state: str, ec: str, pec: str) -> bool:
    """Whether a saga's ``state``, ``ec`` and ``pec`` fields say it waits for its user's
    budget: a step parked for it, or an undo parked while compensating (its ``pec``: the
    ``ec`` keeps the failure that started the compensation)."""
    if state == SagaState.WAITING_RETRY:
        return ec == BUDGET_ERROR
    return state == SagaState.COMPENSATING and pec == BUDGET_ERROR


async def set_and_wake(
    sm: StateMachine, user_id: str, budget: Budget, now: float | None = None
) -> tuple[BudgetStatus, int]:
    """Set a user's budget and, when it is not spent already, wake their budget-parked
    sagas of every type (``saga budget set``, the client, the console). Returns the
    user's status and how many woke."""
    await set_budget(sm.client, sm.keys, user_id, budget)
    [status] = await statuses(sm.client, sm.keys, user_id, now)
    woken = 0 if status.exceeded else await unpark_user(sm, user_id, "budget raised")
    return status, woken


async def clear_and_wake(sm: StateMachine, user_id: str) -> tuple[bool, int]:
    """Remove a user's budget and wake their budget-parked sagas of every type
    (``saga budget clear``). Returns whether they had one and how many woke."""
    had = await clear_budget(sm.client, sm.keys, user_id)
    return had, await unpark_user(sm, user_id, "budget cleared")


async def unpark_user(
    sm: StateMachine, user_id: str, why: str, *, batch: int = 100, op: str | None = None
) -> int:
    """Wake every saga of ``user_id`` parked for its budget (now, not at the next period),
    of every registered saga type: a budget is the user's, whichever type spent it.
    Candidates come from the user's index, the script re-checks each one. Returns how
    many woke; a saga whose budget is still spent parks again on its next model call."""
    validate_id(user_id, "user id")
    woken = 0
    for keys in await keyspaces(sm.client, sm.keys):
        same = keys.saga_type == sm.keys.saga_type
        typed = sm if same else StateMachine(sm.client, keys, sm.limits)
        woken += await _unpark_type(typed, user_id, why, batch, op)
    return woken


async def _unpark_type(sm: StateMachine, user_id: str, why: str, batch: int, op: str | None) -> int:
    """``unpark_user`` for the saga type of ``sm.keys``."""
    keys, client = sm.keys, sm.client
    woken = 0
    page = 500  # the user's index a page at a time: a user may have a long history
    for p in keys.all_partitions():
        for start in itertools.count(0, page):
            got = await client.zrange(keys.user_index(p, user_id), start, start + page - 1)
            chunk = [text(r) for r in got]
            pipe = client.pipeline(transaction=False)
            for rid in chunk:
                pipe.hmget(keys.saga(rid), ["state", "step", "ec", "pec"])
            by_step: dict[str, list[str]] = defaultdict(list)
            for rid, (state, step, ec, pec) in zip(chunk, await pipe.execute(), strict=True):
                if parked_for_budget(text(state), text(ec), text(pec)):
                    by_step[text(step)].append(rid)
            for step, rids in by_step.items():
                for i in range(0, len(rids), batch):
                    woken += await _unpark(sm, p, step, rids[i : i + batch], why, op or new_op())
            if len(chunk) < page:
                break
    return woken


async def _unpark(sm: StateMachine, p: int, step: str, rids: list[str], why: str, op: str) -> int:
    k = sm.keys
    keys = [k.delayed(p, step), k.ready(p, step), *k.state_indexes(p)]
    for rid in rids:
        keys += [k.saga(rid), k.history(rid)]
    args = [step, op, sm.limits.history_maxlen, BUDGET_ERROR, why, *rids]
    reply = await sm._resend(lambda: evalsha(sm.client, "unpark_sagas", keys, args))
    return num(reply[1])


class BudgetStatus(msgspec.Struct, frozen=True, kw_only=True):
    """A user's budget and what they spent in this UTC day and month (``saga budget show``)."""

    user_id: str
    daily_usd: float | None
    """The day's budget; None: no daily limit."""
    monthly_usd: float | None
    spent_today_usd: float
    spent_month_usd: float
    exceeded: str
    """``daily`` or ``monthly`` when the user's model calls are parked now, else ""."""
    resumes_at_ms: int
    """When parked steps run again by themselves (next period start, UTC); 0 if not parked."""
    reserved_usd: float = 0.0
    """Held now by the user's model calls in flight (their worst case, state/budget_holds):
    counted against both budgets until each call's commit or fail settles it."""


async def keyspaces(client: Any, keys: Keys) -> list[Keys]:
    """``keys`` for every registered saga type (each counts its own spend)."""
    from saga.state.types import type_names

    names = set(await type_names(client, keys)) | {keys.saga_type}
    return [keys.of_type(n) for n in sorted(names)]


def held_pipeline(pipe: Any, keyspaces: Sequence[Keys], user_id: str) -> int:
    """Queue the reads of a user's holds (one HGET per partition and type)."""
    n = 0
    for keys in keyspaces:
        for p in keys.all_partitions():
            pipe.hget(keys.holds(p), f"u|{user_id}")
            n += 1
    return n


def sum_held(replies: Sequence[Any]) -> float:
    return round(sum((float(r) for r in replies if r), 0.0), 9)


async def held_of(client: Any, keyspaces: Sequence[Keys], users: Sequence[str]) -> dict[str, float]:
    """Each user's total held now, over every partition and type, in one round trip."""
    pipe = client.pipeline(transaction=False)
    counts = [held_pipeline(pipe, keyspaces, u) for u in users]
    replies = await pipe.execute()
    out, at = {}, 0
    for u, n in zip(users, counts, strict=True):
        out[u] = sum_held(replies[at : at + n])
        at += n
    return out


async def statuses(
    client: Any, keys: Keys, user_id: str | None = None, now: float | None = None
) -> list[BudgetStatus]:
    """Every budgeted user's status (or only ``user_id``'s, budgeted or not)."""
    now = time.time() if now is None else now
    found = await budgets(client, keys, user_id)
    users = [user_id] if user_id is not None else sorted(found)

    spaces = await keyspaces(client, keys)
    spends = await spend_of(client, spaces, users, now)
    held = await held_of(client, spaces, users)
    out = []
    for u in users:
        b, s = found.get(u), spends[u]
        over = over_budget(b, s, now)
        out.append(BudgetStatus(
            user_id=u, daily_usd=b.daily if b else None, monthly_usd=b.monthly if b else None,
            spent_today_usd=s.day, spent_month_usd=s.month, exceeded=over.period if over else "",
            resumes_at_ms=int(over.resumes_at * 1000) if over else 0, reserved_usd=held[u],
        ))  # fmt: skip
    return out


class ParkedCounts(msgspec.Struct, frozen=True, kw_only=True):
    """How many sagas wait for their user's budget, per user and saga type."""

    by_user: dict[str, dict[str, int]]
    """User → saga type → sagas parked for the budget (users with none are absent)."""
    complete: bool
    """False when an index held more sagas than were read: the counts are lower bounds."""
    read: int
    """Saga hashes read."""


async def parked_counts(client: Any, keys: Keys, most: int = 5000) -> ParkedCounts:
    """Budget-parked sagas per user and type, from the state indexes that can hold them
    (waiting_retry; the active index, for undos parked while compensating), at most
    ``most`` sagas read in two round trips, never a key scan."""
    indexes = [(k, k.state_index(p, s))
               for s in (SagaState.WAITING_RETRY, SagaState.COMPENSATING)
               for k in await keyspaces(client, keys) for p in k.all_partitions()]  # fmt: skip
    per = max(1, most // len(indexes))
    pipe = client.pipeline(transaction=False)
    for _, index in indexes:
        pipe.zcard(index)
        pipe.zrange(index, 0, per - 1)
    replies = await pipe.execute()
    complete = all(num(n) <= per for n in replies[0::2])
    found = [
        (k, text(r)) for (k, _), rids in zip(indexes, replies[1::2], strict=True) for r in rids
    ]
    pipe = client.pipeline(transaction=False)
    for k, rid in found:
        pipe.hmget(k.saga(rid), ["uid", "state", "ec", "pec"])
    by_user: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for (k, _), (uid, state, ec, pec) in zip(found, await pipe.execute(), strict=True):
        if parked_for_budget(text(state), text(ec), text(pec)):
            by_user[text(uid)][k.saga_type] += 1
    return ParkedCounts(by_user={u: dict(n) for u, n in sorted(by_user.items())},
                        complete=complete, read=len(found))  # fmt: skip
