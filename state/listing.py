"""``saga list`` and the console's saga list: sagas read from the indexes, newest first,
never by scanning keys, a page at a time (``Cursor``)."""

from __future__ import annotations

from collections import deque
from typing import Any

import msgspec

from saga.state.errors import InvalidIdError
from saga.state.ids import validate_id
from saga.state.keys import Keys
from saga.state.model import SagaState, park_reason
from saga.state.queries import registered_steps
from saga.state.replies import num, text
from saga.state.sealing import error_message


class SagaRow(msgspec.Struct, frozen=True):
    record_id: str
    user_id: str
    state: str
    step: str
    attempts: int
    """Attempts at the current step in the current epoch."""
    created_ms: int
    updated_ms: int
    cost: float
    error_class: str
    error_message: str
    review: str = ""
    """``"<step>: <reason>"`` of the first step that flagged it for review; "" if none."""
    parked: str = ""
    """Why it waits without spending attempts: ``budget`` or ``circuit``; "" otherwise."""
    lanes: tuple[str, ...] = ()
    """While its branches run: the steps in flight (``step`` is the first of them)."""


class Cursor(msgspec.Struct, frozen=True):
    """Where a page of ``saga list`` ended: the index score and record id of its last
    entry. Index entries are ordered by (score, record id), highest first."""

    score: int
    record_id: str

    def encode(self) -> str:
        """``<score>.<record id>`` (ids are safe in a URL; a score has no dot)."""
        return f"{self.score}.{self.record_id}"

    @classmethod
    def decode(cls, value: str) -> Cursor:
        score, _, rid = value.partition(".")
        if not score.isdigit() or len(score) > 18:
            raise InvalidIdError(f"cursor {value[:40]!r} is not one this listing gave")
        return cls(int(score), validate_id(rid, "cursor record id"))


class ListQuery(msgspec.Struct, frozen=True, kw_only=True):
    state: SagaState | None = None
    step: str | None = None
    user: str | None = None
    since_ms: int = 0
    """Created at or after this time (epoch ms); 0 for any."""
    review: bool = False
    """Only sagas flagged for review (read from the review index)."""
    parked: bool = False
    """Only parked sagas (waiting, their attempt refunded: budget or circuit); read from
    the waiting_retry index."""
    limit: int = 50
    after: Cursor | None = None
    """Continue after the entry a previous page ended at."""
    before: Cursor | None = None
    """The page before: the entries just newer than the one a later page started at
    (still shown newest first). Not with ``after``."""
    version_of: str = ""
    """With ``version``: only sagas whose step ``version_of`` committed, last, with its
    code at that version (``saga list --step-version STEP:V``; read from the saga's
    ``done:<step>`` and ``sv:<step>``, which the commit writes)."""
    version: int = 0
    order: str = "created"
    """``created``: from the most selective index (with a state, by the time it entered
    the state); ``updated``: every saga by the time of its last change of state."""


class SagaPage(msgspec.Struct, frozen=True):
    rows: list[SagaRow]
    next: Cursor | None
    """Where the next page starts; None when the index has nothing more."""
    skipped: int = 0
    """Index entries passed over because their record id is malformed (anything with
    write access can add one; none can be a saga's), left in place for an operator."""
    prev: Cursor | None = None
    """Where the page before this one ends (its ``before``); None on the first page."""


_FIELDS = ("uid", "state", "step", "created", "updated", "ec", "em", "lanes", "sect", "epoch")
_MAX_ROUNDS = 20


async def list_sagas(client: Any, keys: Keys, q: ListQuery) -> list[SagaRow]:
    """Sagas matching ``q``, newest first (one page of ``list_page``)."""
    return (await list_page(client, keys, q)).rows


async def list_page(client: Any, keys: Keys, q: ListQuery) -> SagaPage:
    """Sagas matching ``q``, newest first, read from the most selective index.

    The user index (by creation time) when a user is given, else the state index
    (by time of entering the state), else the created index; partitions are
    merged by score, hashes fetched in one pipeline per round, and members whose
    saga hash has expired are removed from the index they were read from. The
    page's cursor is the last entry read, so filtered-out entries are not read twice.
    """
    steps = await registered_steps(client, keys)
    fields = _fields_of(steps)
    if q.version_of:
        fields += [f"done:{q.version_of}", f"sv:{q.version_of}"]
    back = q.before is not None
    want = q.limit + 1 if back else q.limit  # reading back: one more says a page is before
    merge = _IndexMerge(client, _indexes(keys, q), q, min(max(q.limit, 50), 1000))
    rows: list[SagaRow] = []
    at: list[Cursor] = []
    """The index position of each row (a page's first and last are the links' cursors)."""
    seen: set[str] = set()
    last: Cursor | None = None
    skipped = 0
    for _ in range(_MAX_ROUNDS):
        batch = [c for c in await merge.take(max(want - len(rows), 25) * 2) if c[1] not in seen]
        if not batch:
            last = None
            break
        seen.update(rid for _, rid, _ in batch)
        batch, bad = _well_formed(batch)
        skipped += bad
        pipe = client.pipeline(transaction=False)
        for _, rid, _ in batch:
            pipe.hmget(keys.saga(rid), fields)
        expired = []
        for (score, rid, index), values in zip(batch, await pipe.execute(), strict=True):
            if len(rows) >= want:
                break
            last = Cursor(int(score), rid)
            if values[1] is None:
                expired.append((index, rid))
                continue
            if q.version_of and not _ran_version(values[-2:], q.version):
                continue
            row = _saga_row(rid, values[:-2] if q.version_of else values, steps)
            if _matches(row, q):
                rows.append(row)
                at.append(last)
        await _prune(client, expired)
        if len(rows) >= want:
            break
    if back:  # read oldest first from the cursor up: shown newest first
        more = len(rows) > q.limit
        rows, at = rows[: q.limit][::-1], at[: q.limit][::-1]
        return SagaPage(rows, at[-1] if at else None, skipped, at[0] if more else None)
    prev = at[0] if at and q.after is not None else None
    return SagaPage(rows, last, skipped, prev)


async def rows_of(client: Any, keys: Keys, record_ids: list[str]) -> list[SagaRow]:
    """The list rows of these sagas, in this order (one pipeline); gone ones are left out."""
    steps = await registered_steps(client, keys)
    fields = _fields_of(steps)
    pipe = client.pipeline(transaction=False)
    for rid in record_ids:
        pipe.hmget(keys.saga(rid), fields)
    found = zip(record_ids, await pipe.execute(), strict=True)
    return [_saga_row(rid, v, steps) for rid, v in found if v[1] is not None]


def _fields_of(steps: list[str]) -> list[str]:
    return [*_FIELDS, *(f"{kind}:{s}" for kind in ("att", "cost", "rv") for s in steps)]


def _well_formed(batch: list[tuple[float, str, str]]) -> tuple[list[tuple[float, str, str]], int]:
    """The entries whose record id is valid, and how many were not (a cursor is never
    made of a malformed one, so a page after it reads it once more at most)."""
    good = []
    for entry in batch:
        try:
            validate_id(entry[1], "record_id")
        except InvalidIdError:
            continue
        good.append(entry)
    return good, len(batch) - len(good)


def _indexes(keys: Keys, q: ListQuery) -> list[str]:
    """The indexes a listing merges: one per partition, or, ordered by update, every
    state index of every partition (a saga is in exactly one; pending and running
    share theirs)."""
    from saga.state.keys import INDEXED

    if q.order == "updated" and not (q.review or q.state or q.parked):
        found = [keys.state_index(p, s) for p in keys.all_partitions() for s in INDEXED]
        return list(dict.fromkeys(found))
    return [_index(keys, p, q) for p in keys.all_partitions()]


def _index(keys: Keys, p: int, q: ListQuery) -> str:
    if q.user and q.order != "updated":
        return keys.user_index(p, q.user)
    if q.review:
        return keys.review_index(p)
    if q.state:
        return keys.state_index(p, q.state)
    if q.parked:
        return keys.state_index(p, SagaState.WAITING_RETRY)
    return keys.created_index(p)


def _saga_row(rid: str, v: list[Any], steps: list[str]) -> SagaRow:
    n, m, step = len(_FIELDS), len(steps), text(v[2])
    attempts = {s: text(v[n + i]) for i, s in enumerate(steps)}
    cost = round(sum(float(c) for c in v[n + m : n + 2 * m] if c), 9)
    tries = num(attempts.get(step, "").rpartition(":")[2])
    flags = [f"{s}: {text(r)}" for s, r in zip(steps, v[n + 2 * m :], strict=True) if r]
    state, ec = text(v[1]), text(v[5])
    parked = park_reason(ec) if state == SagaState.WAITING_RETRY else ""
    live = state == SagaState.RUNNING and text(v[8]) != "" and text(v[8]) == text(v[9])
    lanes = tuple(text(v[7]).split()) if live else ()
    return SagaRow(rid, text(v[0]), state, step, tries, num(v[3]), num(v[4]), cost,
                   ec, error_message(text(v[6])), flags[0] if flags else "", parked,
                   lanes)  # fmt: skip


def _ran_version(done_and_version: list[Any], version: int) -> bool:
    """The step committed (``done:<step>``) with its code at ``version`` (``sv:<step>``;
    none recorded: 1)."""
    done, recorded = done_and_version
    return done is not None and (num(recorded) or 1) == version


def _matches(row: SagaRow, q: ListQuery) -> bool:
    return (
        (not q.user or row.user_id == q.user)
        and (not q.state or row.state == q.state.value)
        and (not q.step or row.step == q.step or q.step in row.lanes)
        and (not q.review or bool(row.review))
        and (not q.parked or bool(row.parked))
        and row.created_ms >= q.since_ms
    )


async def _prune(client: Any, expired: list[tuple[str, str]]) -> None:
    if expired:
        pipe = client.pipeline(transaction=False)
        for index, rid in expired:
            pipe.zrem(index, rid)
        await pipe.execute()


class _IndexMerge:
    """Merges per-partition index ranges (highest score first; lowest first from a
    ``before`` cursor), refilled on demand."""

    def __init__(self, client: Any, indexes: list[str], q: ListQuery, batch: int) -> None:
        self.client, self.indexes, self.batch = client, indexes, batch
        self.up = q.before is not None
        self.cursor = q.before if q.before is not None else q.after
        self.low: int | str = q.before.score if q.before else (q.since_ms or "-inf")
        self.high: int | str = q.after.score if q.after else "+inf"
        self.buffers: dict[str, deque[tuple[Any, float]]] = {i: deque() for i in indexes}
        self.offsets = dict.fromkeys(indexes, 0)
        self.exhausted: set[str] = set()

    async def _fill(self, indexes: list[str]) -> None:
        pipe = self.client.pipeline(transaction=False)
        for i in indexes:
            if self.up:
                pipe.zrangebyscore(
                    i, self.low, self.high, start=self.offsets[i], num=self.batch, withscores=True
                )
            else:
                pipe.zrevrangebyscore(
                    i, self.high, self.low, start=self.offsets[i], num=self.batch, withscores=True
                )
        for i, rows in zip(indexes, await pipe.execute(), strict=True):
            self.buffers[i].extend(r for r in rows if self._past_cursor(r))
            self.offsets[i] += len(rows)
            if len(rows) < self.batch:
                self.exhausted.add(i)

    def _past_cursor(self, entry: tuple[Any, float]) -> bool:
        """Entries of the cursor's own score come after it when their id sorts lower
        (higher, reading up from a ``before`` cursor)."""
        c = self.cursor
        if c is None:
            return True
        if self.up:
            return entry[1] > c.score or text(entry[0]) > c.record_id
        return entry[1] < c.score or text(entry[0]) < c.record_id

    async def take(self, n: int) -> list[tuple[float, str, str]]:
        """Up to ``n`` (score, record id, index) triples, highest score first (lowest
        first reading up)."""
        out: list[tuple[float, str, str]] = []
        pick = min if self.up else max
        while len(out) < n:
            empty = [i for i in self.indexes if not self.buffers[i] and i not in self.exhausted]
            if empty:
                await self._fill(empty)
            live = [i for i in self.indexes if self.buffers[i]]
            if not live:
                break
            # (score, id): one total order over partitions, the order a cursor resumes in.
            best = pick(live, key=lambda i: (self.buffers[i][0][1], text(self.buffers[i][0][0])))
            member, score = self.buffers[best].popleft()
            out.append((score, text(member), best))
        return out
