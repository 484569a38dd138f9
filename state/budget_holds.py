"""Budget holds: a model call's worst-case cost reserved against its user's budget before
the call (``reserve_budget.lua``), released by the commit or fail that attributes the
call's real cost (the cached-answer keys it passes), or by the maintenance sweep when
the attempt that made it is gone (``lapse_holds.lua``). docs/budgets.md, "Reserve, then
settle".

The check is exact on one Redis server: the script reads the spend and holds of every
partition and saga type. On Redis Cluster a script sees one slot, so it reads its own
partition's and is told the rest (read just before, in one pipeline): two calls of one
user in different partitions may then both pass at the same instant.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import msgspec

from saga.state.budgets import Budget, Exceeded, next_day, next_month, utc_period
from saga.state.codes import RC, raise_for, to_code
from saga.state.keys import Keys
from saga.state.replies import num, text
from saga.state.scripts import evalsha

HELD_RETRY_S = 10.0
"""A call that does not fit only because of other calls' holds parks this long (they
settle, usually below their estimate), not until the next period."""

_MOST_KEYS = 256  # reserve_budget's bound on partitions x saga types in one call


class HoldRequest(msgspec.Struct, frozen=True, kw_only=True):
    """One call's reservation: whose, for which attempt, how much, until when."""

    record_id: str
    user_id: str
    token: str
    """The attempt's fencing token: a fenced attempt cannot reserve."""
    hold_id: str
    """The call's answer-cache key: its commit or fail releases the hold by it."""
    usd: float
    deadline_ms: int
    """The attempt's lease deadline: past it (the attempt gone) the hold lapses."""


def _f(x: float | None) -> str:
    return "" if x is None else repr(float(x))


async def _outside(
    client: Any, keyspaces: Sequence[Keys], own: tuple[str, int], user: str, now: float
) -> tuple[float, float]:
    """Spend and holds (day, month) of every partition and type but ``own`` (cluster)."""
    month, dd, _ = utc_period(now)
    pipe = client.pipeline(transaction=False)
    for keys in keyspaces:
        for p in keys.all_partitions():
            if (keys.saga_type, p) != own:
                pipe.hmget(keys.spend(p, month), [user, f"{user}|{dd}"])
                pipe.hget(keys.holds(p), f"u|{user}")
    replies = await pipe.execute()
    day = mon = 0.0
    for (m, d), h in zip(replies[0::2], replies[1::2], strict=True):
        held = float(h) if h else 0.0
        mon += (float(m) if m else 0.0) + held
        day += (float(d) if d else 0.0) + held
    return day, mon


async def reserve(
    client: Any,
    keys: Keys,
    keyspaces: Sequence[Keys],
    req: HoldRequest,
    budget: Budget,
    *,
    now: float | None = None,
    cluster: bool = False,
) -> Exceeded | None:
    """Hold ``req.usd`` of ``req.user_id``'s budget for one call; None when held (or held
    already: a killed attempt's call run again), else which budget it does not fit in.
    Raises LeaseLostError when the attempt is fenced, SagaNotFoundError when it is gone."""
    now = time.time() if now is None else now
    _, dd, _ = utc_period(now)
    p = keys.partition_of(req.record_id)
    if cluster:
        counted = [(keys, p)]
        day, mon = await _outside(client, keyspaces, (keys.saga_type, p), req.user_id, now)
    else:
        counted = [(k, q) for k in keyspaces for q in k.all_partitions()][:_MOST_KEYS]
        day = mon = 0.0
    month = utc_period(now)[0]
    rk = [keys.saga(req.record_id), keys.holds(p), keys.holds_due(p)]
    rk += [k.spend(q, month) for k, q in counted]
    rk += [k.holds(q) for k, q in counted]
    args = [req.token, req.user_id, req.hold_id, repr(float(req.usd)), req.deadline_ms, dd]
    args += [_f(budget.daily), _f(budget.monthly), len(counted), repr(day), repr(mon)]
    reply = await evalsha(client, "reserve_budget", rk, args)
    code = to_code(reply[0])
    if code in (RC.OK, RC.DUPLICATE):
        return None
    if code != RC.OVER_BUDGET:
        raise_for(code, req.record_id)
    period, spent, held, limit = text(reply[1]), float(reply[2]), float(reply[3]), float(reply[4])
    fits_later = spent + req.usd <= limit + 1e-12  # once the others' holds settle
    if fits_later:
        resumes = now + HELD_RETRY_S
    else:
        resumes = next_month(now) if period == "monthly" else next_day(now)
    return Exceeded(period, round(spent + held, 9), limit, resumes)


class Lapsed(msgspec.Struct, frozen=True):
    released: int = 0
    usd: float = 0.0
    extended: int = 0


async def lapse_holds(
    client: Any, keys: Keys, partition: int, *, now_ms: int | None = None, batch: int = 64
) -> Lapsed:
    """Release the partition's holds whose attempt is gone (past their deadline, the
    saga no longer running under the token that made them), ``batch`` a call, until
    none is due. Holds of attempts still running move to their lease's deadline."""
    released = extended = 0
    usd = 0.0
    cutoff = int(time.time() * 1000) if now_ms is None else now_ms
    for _ in range(10_000):  # bounded; each pass removes or moves the holds it read
        ids = [text(i) for i in await client.zrangebyscore(
            keys.holds_due(partition), "-inf", cutoff, start=0, num=batch)]  # fmt: skip
        if not ids:
            break
        values = await client.hmget(keys.holds(partition), ids)
        sagas = []
        for v in values:  # "<user>|<usd>|<token>|<record>"; a settled hold reads None
            record = text(v).split("|", 3)[3] if v else ""
            sagas.append(keys.saga(record) if record else keys.holds(partition))
        rk = [keys.holds(partition), keys.holds_due(partition), keys.stats(partition), *sagas]
        reply = await evalsha(client, "lapse_holds", rk, [len(ids), *ids])
        released += num(reply[1])
        usd += float(reply[2])
        extended += num(reply[3])
        settled = sum(1 for v in values if not v)
        if len(ids) < batch or num(reply[1]) + num(reply[3]) + settled == 0:
            break
    return Lapsed(released, round(usd, 9), extended)
