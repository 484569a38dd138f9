"""Erasure: every trace of a record, or of a user's records, deleted (``saga purge``).

A record's own keys (hash, history, pages, the set of embeddings it used) and its index
entries go in one script per record (``purge_record.lua``), with what is found of it
elsewhere in its partition, read here first: entries naming it in the ready, dead-letter
and quarantine streams, its cached LLM answers, its user's slots and deferrals. The
cached embedding vectors it used are shared by every record (another hash tag): they
are deleted too (a later record pays for them again). A saga that is active (pending,
running, waiting for a retry, waiting at a wait or a timer, compensating) is refused:
cancel it first — a running attempt could otherwise write its cached answers after the purge.

A user's purge (``purge_user``) purges each of their records, batch after batch, in
every saga type; then what belongs to the user: their fields of the cost ledgers move to
``ERASED_USER`` (the amounts stay, so totals still add up), their budget and cached
billing key are deleted. Nothing is written in a dry run (``apply=False``): the report
counts what would go.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

import msgspec

from saga.state.codes import RC, to_code
from saga.state.keys import ERASED_USER, Keys
from saga.state.replies import num, text
from saga.state.scripts import evalsha

_SCAN = 1000
"""Entries (or keys) read per call while looking for a record's traces."""
_MAX_SCANNED = 200_000
"""Entries read per stream at most: a ready stream is trimmed behind its readers, a
quarantine stream capped at ~10,000; dead letters beyond this are not looked at."""
_CALL = 256
"""Keys, entries or members per purge_record call (the script's bound)."""
_ACTIVE = frozenset({"pending", "running", "waiting_retry", "waiting", "compensating"})
_CACHE_TAIL = re.compile(r"(?:undo:)?[a-z][a-z0-9_]{0,31}:[^:]+")


class RecordPurge(msgspec.Struct, kw_only=True):
    """What a record's purge deleted (or would delete, in a dry run)."""

    record_id: str
    user_id: str
    state: str
    """The saga's state ("" when its hash was gone already: leftovers only)."""
    keys: int = 0
    """Its own keys and cached answers."""
    entries: int = 0
    """Stream entries naming it (ready, dead letters, quarantine)."""
    members: int = 0
    """Users' slots and deferrals of it."""
    embeddings: int = 0
    """Cached embedding vectors it used (shared: others pay for them again)."""
    refused: str = ""
    """Why it was not purged ("" when it was)."""


class _Traces(msgspec.Struct, kw_only=True):
    entries: dict[str, list[str]] = {}
    """Stream key -> ids of entries naming the record."""
    members: dict[str, list[str]] = {}
    """Sorted set -> its members naming the record."""
    caches: list[str] = []
    embeddings: list[str] = []


class Purger:
    """Purges records of one saga type; ``steps`` are its steps and undo steps (the
    streams looked in)."""

    def __init__(self, client: Any, keys: Keys, steps: Sequence[str]) -> None:
        self.client, self.keys, self.steps = client, keys, tuple(dict.fromkeys(steps))

    async def record(self, record_id: str, *, apply: bool, user_id: str = "") -> RecordPurge:
        """Purge one record: refused while its saga is active. ``user_id``: whose it is,
        when its hash may be gone (a user's purge finds it in the user's index)."""
        k = self.keys
        state, user = await self.client.hmget(k.saga(record_id), "state", "uid")
        state, user = text(state) if state else "", text(user) if user else user_id
        report = RecordPurge(record_id=record_id, user_id=user, state=state)
        if state in _ACTIVE:
            report.refused = f"it is {state}; cancel it first (saga cancel {record_id})"
            return report
        found = await self._traces(record_id, user)
        report.entries = sum(len(v) for v in found.entries.values())
        report.members = sum(len(v) for v in found.members.values())
        report.embeddings = len(found.embeddings)
        own = [k.saga(record_id), k.history(record_id), k.pages(record_id), k.derived(record_id)]
        report.keys = int(await self.client.exists(*own)) + len(found.caches)
        if not apply:
            return report
        await self._delete_embeddings(found.embeddings)
        refused = await self._run(record_id, user, found)
        if refused:  # it came alive between the read and the script
            report.refused = f"it is {refused}; cancel it first (saga cancel {record_id})"
        return report

    async def _traces(self, record_id: str, user: str) -> _Traces:
        k, p = self.keys, self.keys.partition_of(record_id)
        found = _Traces()
        streams = [k.quarantine(p)]
        for step in self.steps:
            streams += [k.ready(p, step), k.dead(p, step)]
        for stream in streams:
            ids = await entries_naming(self.client, stream, {record_id})
            if ids.get(record_id):
                found.entries[stream] = ids[record_id]
        prefix = k.llm_cache_of(record_id)[:-1]
        async for raw in self.client.scan_iter(match=k.llm_cache_of(record_id), count=_SCAN):
            key = text(raw)
            if _CACHE_TAIL.fullmatch(key[len(prefix) :]):
                found.caches.append(key)
        emb = f"{{{k.prefix}:emb}}:"
        members = await self.client.smembers(k.derived(record_id))
        found.embeddings = sorted(text(m) for m in members if text(m).startswith(emb))
        if user:
            await self._slots(found, p, user, record_id)
        return found

    async def _slots(self, found: _Traces, p: int, user: str, record_id: str) -> None:
        """The user's slot (per-user cap) and deferrals of the record at each step, and its
        priority listings (urgent, and lowered by epoch: the last 64)."""
        k = self.keys
        epoch = int(await self.client.hget(k.saga(record_id), "epoch") or 1)
        lowered = [f"{record_id}|{e}" for e in range(max(1, epoch - 63), epoch + 1)]
        pipe = self.client.pipeline(transaction=False)
        for step in self.steps:
            pipe.zscore(k.inflight(p, step), f"{user}|{record_id}")
            pipe.zrangebylex(k.deferred(p, step), f"[{user}|", f"[{user}|\xff", 0, 1000)
            pipe.zscore(k.urgent(p, step), record_id)
            pipe.zmscore(k.lowered(p, step), lowered)
        replies = iter(await pipe.execute())
        for step in self.steps:
            if next(replies) is not None:
                found.members.setdefault(k.inflight(p, step), []).append(f"{user}|{record_id}")
            mine = [text(m) for m in next(replies) if text(m).split("|")[2:3] == [record_id]]
            if mine:
                found.members.setdefault(k.deferred(p, step), []).extend(mine)
            if next(replies) is not None:
                found.members.setdefault(k.urgent(p, step), []).append(record_id)
            low = [m for m, score in zip(lowered, next(replies), strict=True) if score is not None]
            if low:
                found.members.setdefault(k.lowered(p, step), []).extend(low)

    async def _delete_embeddings(self, embeddings: Sequence[str]) -> None:
        for at in range(0, len(embeddings), _CALL):  # one hash tag: one DEL a chunk
            await self.client.delete(*embeddings[at : at + _CALL])

    async def _run(self, record_id: str, user: str, found: _Traces) -> str:
        """purge_record calls until every trace is passed; the active state that refused
        the first, or ""."""
        entries = [(s, i) for s, ids in found.entries.items() for i in ids]
        members = [(z, m) for z, ms in found.members.items() for m in ms]
        caches = list(found.caches)
        first = True
        while first or entries or caches or members:
            call_entries, entries = entries[:_CALL], entries[_CALL:]
            call_members, members = members[:_CALL], members[_CALL:]
            call_caches, caches = caches[:_CALL], caches[_CALL:]
            reply = await self._call(record_id, user, call_entries, call_caches, call_members)
            if to_code(reply[0]) == RC.WRONG_STATE:
                return text(reply[1])
            first = False
        return ""

    async def _call(
        self,
        record_id: str,
        user: str,
        entries: list[tuple[str, str]],
        caches: list[str],
        members: list[tuple[str, str]],
    ) -> Any:
        k, p = self.keys, self.keys.partition_of(record_id)
        rk = k.record(record_id)
        streams = list(dict.fromkeys(s for s, _ in entries))
        zsets = list(dict.fromkeys(z for z, _ in members))
        keys = [rk.saga, rk.history, rk.pages, k.derived(record_id), k.created_index(p)]
        keys.append(k.user_index(p, user) if user else rk.saga)
        keys += [*k.state_indexes(p), k.review_index(p), k.retired(p), *streams, *caches, *zsets]
        args: list[Any] = [record_id, user, len(streams), len(caches), len(zsets), len(entries)]
        for stream, entry in entries:
            args += [streams.index(stream) + 1, entry]
        args.append(len(members))
        for zset, member in members:
            args += [zsets.index(zset) + 1, member]
        return await evalsha(self.client, "purge_record", keys, args)


async def entries_naming(client: Any, stream: str, records: set[str]) -> dict[str, list[str]]:
    """Record -> ids of the entries of ``stream`` that name it (a field ``rid``, the
    ``raw`` fields of a quarantined entry, or the id as a word of any value), read in
    pages of ``_SCAN`` up to ``_MAX_SCANNED`` entries."""
    out: dict[str, list[str]] = {}
    words = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@+=-]*")
    start, seen = "-", 0
    while seen < _MAX_SCANNED:
        rows = await client.xrange(stream, min=start, max="+", count=_SCAN)
        for entry_id, fields in rows:
            values = [text(v) for v in fields.values()]
            named = records.intersection(w for v in values for w in words.findall(v))
            for rid in named:
                out.setdefault(rid, []).append(text(entry_id))
        if len(rows) < _SCAN:
            break
        seen += len(rows)
        start = "(" + text(rows[-1][0])
    return out


class UserPurge(msgspec.Struct, kw_only=True):
    """What a user's purge deleted (or would delete)."""

    user_id: str
    records: list[RecordPurge]
    ledger_fields: int = 0
    """Cost ledger fields moved to the erased user."""
    user_keys: int = 0
    """The user's budget, cached billing key and leftover index and slot entries."""


async def purge_user(
    client: Any, purgers: Iterable[Purger], user_id: str, *, apply: bool, batch: int = 100
) -> UserPurge:
    """Purge every record of ``user_id`` in each type's partitions, ``batch`` records at a
    time, then what is the user's own; refused records (active) are reported and left."""
    report = UserPurge(user_id=user_id, records=[])
    all_purgers = list(purgers)
    for purger in all_purgers:
        for p in purger.keys.all_partitions():
            await _user_records(purger, p, user_id, report, apply=apply, batch=batch)
            report.ledger_fields += await _forget_costs(purger, p, user_id, apply=apply)
    if all_purgers:
        report.user_keys += await _user_keys(all_purgers[0].keys, client, user_id, apply=apply)
    return report


async def _user_records(
    purger: Purger, p: int, user_id: str, report: UserPurge, *, apply: bool, batch: int
) -> None:
    index, skip, seen = purger.keys.user_index(p, user_id), 0, set()
    while True:
        rows = [text(r) for r in await purger.client.zrange(index, skip, skip + batch - 1)]
        if not rows:
            return
        for record_id in rows:
            if record_id in seen:  # still indexed after its purge (another user's hash)
                skip += 1
                continue
            seen.add(record_id)
            done = await purger.record(record_id, apply=apply, user_id=user_id)
            report.records.append(done)
            if done.refused or not apply:
                skip += 1  # left in the index: the next batch starts after it


async def _forget_costs(purger: Purger, p: int, user_id: str, *, apply: bool) -> int:
    """The user's fields of the partition's cost ledgers, moved to the erased user."""
    moved = 0
    for pattern in purger.keys.ledger_patterns(p):
        async for raw in purger.client.scan_iter(match=pattern, count=_SCAN):
            ledger = text(raw)
            fields = [text(f) async for f, _ in _hscan(purger.client, ledger, user_id)]
            for at in range(0, len(fields), 100):
                chunk = fields[at : at + 100]
                if not apply:
                    moved += len(chunk)
                    continue
                args = [user_id, ERASED_USER, *chunk]
                moved += num((await evalsha(purger.client, "forget_user_costs", [ledger], args))[1])
    return moved


async def _hscan(client: Any, ledger: str, user_id: str) -> Any:
    async for field, value in client.hscan_iter(ledger, match=f"{user_id}*", count=_SCAN):
        name = text(field)
        if name == user_id or name.startswith(f"{user_id}|"):
            yield field, value


async def _user_keys(keys: Keys, client: Any, user_id: str, *, apply: bool) -> int:
    """The user's budget and cached billing key (shared by every type)."""
    shared = [keys.billing_key(user_id), keys.billing_lock(user_id)]
    found = int(await client.exists(*shared)) + int(await client.hexists(keys.budgets(), user_id))
    if apply and found:
        for key in shared:  # no common hash tag: one DEL each (a cluster)
            await client.delete(key)
        await client.hdel(keys.budgets(), user_id)
    return found


async def work_of(client: Any, keys: Keys, steps: Iterable[str] = ()) -> list[str]:
    """The steps whose streams may name a record of ``keys``' type: ``steps``, every step
    a worker or client made groups for (the type's steps registry), and their undo steps."""
    from saga.state.ids import validate_work
    from saga.state.model import undo_of

    names = {text(s) for s in await client.smembers(keys.steps_registry())} | set(steps)
    out: list[str] = []
    for name in sorted(names):
        for work in (name, name if name.startswith("undo:") else undo_of(name)):
            try:
                out.append(validate_work(work))
            except ValueError:
                continue
    return list(dict.fromkeys(out))
