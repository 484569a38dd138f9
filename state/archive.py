"""Audit export: sagas and their whole histories as JSON Lines (``saga export``, and the
retention sweep's archive under ``SAGA_ARCHIVE_DIR``).

One line per saga (``ArchivedSaga``): its hash and history as they are stored, and the
index entries it had, so ``saga import`` (``saga.state.archive_import``) can put it back
exactly. Values are text, or ``{"b64": ...}`` for bytes that are not UTF-8 — a value
sealed under a data key stays sealed (``state/sealing.py``) unless the export is asked
to open it (``opener``). Records are read from the created index in (partition, created
time, record id) order, a page at a time: memory is one page, however many sagas there
are, and every line carries the cursor after it, so an interrupted export resumes from
its last line.
"""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator, Sequence
from typing import Any

import msgspec

from saga.state.history_codec import event_fields
from saga.state.keys import Keys
from saga.state.replies import text
from saga.state.sealing import DETAIL_SEP, MARK, Sealer

FORMAT = 1
"""Version of the line format (``ArchivedSaga.v``)."""
_PAGE = 200
"""Records read from the created index per call."""
_HISTORY_PAGE = 500


class Bytes(msgspec.Struct, frozen=True):
    """A value that is not UTF-8 text (a sealed value, most often), base64."""

    b64: str


Value = str | Bytes


class ArchivedSaga(msgspec.Struct, kw_only=True):
    """One exported saga."""

    v: int = FORMAT
    saga_type: str
    record_id: str
    user_id: str
    state: str
    created_ms: int
    saga: dict[str, Value]
    """The saga hash, field by field, as stored (short names: docs/operations.md)."""
    history: list[tuple[str, dict[str, Value]]]
    """The history stream: entry id (ms-seq) and fields, oldest first."""
    indexes: dict[str, float] = {}
    """Scores of its index entries: created, state, user, review, retired."""
    cursor: str = ""
    """Where an export resumes after this line."""


class ExportCursor(msgspec.Struct, frozen=True):
    """(saga type, partition, created ms, record id) of the last exported saga."""

    saga_type: str
    partition: int
    created_ms: int
    record_id: str

    def encode(self) -> str:
        return f"{self.saga_type}/{self.partition}/{self.created_ms}/{self.record_id}"

    @classmethod
    def decode(cls, raw: str) -> ExportCursor:
        parts = raw.split("/")
        if len(parts) != 4 or not parts[1].isdigit() or not parts[2].lstrip("-").isdigit():
            raise ValueError(f"{raw!r} is not an export cursor (type/partition/ms/record)")
        return cls(parts[0], int(parts[1]), int(parts[2]), parts[3])


class Selection(msgspec.Struct, frozen=True, kw_only=True):
    """Which sagas an export takes."""

    since_ms: int = 0
    """Created at or after (ms since the epoch); 0: all."""
    user_id: str = ""
    after: ExportCursor | None = None


def encode_value(raw: bytes, opener: Sealer | None = None) -> Value:
    """A stored value for a line: opened first when ``opener`` is given."""
    if opener is not None:
        raw = open_value(raw, opener)
    if raw.startswith(MARK):
        return Bytes(base64.b64encode(raw).decode())
    try:
        return raw.decode()
    except UnicodeDecodeError:
        return Bytes(base64.b64encode(raw).decode())


def decode_value(value: Value) -> bytes:
    return base64.b64decode(value.b64) if isinstance(value, Bytes) else value.encode()


def open_value(raw: bytes, opener: Sealer) -> bytes:
    """A sealed value opened: a whole sealed value, a sealed text (``sg1:``…), or a
    stored error whose detail is sealed after ``DETAIL_SEP``."""
    if raw.startswith(MARK):
        return opener.unseal(raw)
    value = raw.decode(errors="surrogateescape")
    if opener.is_sealed_text(value):
        return opener.unseal_text(value).encode()
    message, sep, detail = value.partition(DETAIL_SEP)
    if sep and opener.is_sealed_text(detail):
        return (message + sep + opener.unseal_text(detail)).encode()
    return raw


async def read_saga(
    client: Any, keys: Keys, record_id: str, opener: Sealer | None = None
) -> ArchivedSaga | None:
    """One saga as a line (None when its hash is gone)."""
    return (await read_sagas(client, keys, [record_id], opener))[0]


async def read_sagas(
    client: Any, keys: Keys, records: Sequence[str], opener: Sealer | None = None
) -> list[ArchivedSaga | None]:
    """Sagas of one partition as lines (None for a hash gone), in two pipelined round
    trips however many (a page); a history longer than a page is read on, alone."""
    from saga.state.model import SagaState

    pipe = client.pipeline(transaction=False)
    for record_id in records:
        rk = keys.record(record_id)
        pipe.hgetall(rk.saga)
        pipe.xrange(rk.history, min="-", max="+", count=_HISTORY_PAGE)
    replies = await pipe.execute()
    pipe = client.pipeline(transaction=False)
    for at, record_id in enumerate(records):
        raw, p = replies[2 * at], keys.partition_of(record_id)
        user, state = text(raw.get(b"uid", b"")), text(raw.get(b"state", b"")) or "pending"
        pipe.zscore(keys.created_index(p), record_id)
        pipe.zscore(keys.user_index(p, user), record_id) if user else pipe.echo("")
        pipe.zscore(keys.review_index(p), record_id)
        pipe.zscore(keys.retired(p), f"{user}|{record_id}")
        pipe.zscore(keys.state_index(p, SagaState(state)), record_id)
    scores = await pipe.execute()
    out: list[ArchivedSaga | None] = []
    names = ("created", "user", "review", "retired", "state")
    for at, record_id in enumerate(records):
        raw, rows = replies[2 * at], replies[2 * at + 1]
        if not raw:
            out.append(None)
            continue
        if len(rows) == _HISTORY_PAGE:
            rows = rows + await _rest_of_history(client, keys, record_id, rows[-1][0])
        mine = zip(names, scores[5 * at : 5 * at + 5], strict=True)
        out.append(
            ArchivedSaga(
                saga_type=keys.saga_type,
                record_id=record_id,
                user_id=text(raw.get(b"uid", b"")),
                state=text(raw.get(b"state", b"")),
                created_ms=int(text(raw.get(b"created", b"0")) or 0),
                saga={text(k): encode_value(v, opener) for k, v in raw.items()},
                history=[
                    (text(i), {text(k): encode_value(v, opener) for k, v in fields.items()})
                    for i, fields in ((i, event_fields(e)) for i, e in rows)
                ],
                indexes={n: float(v) for n, v in mine if v not in (None, b"")},
            )
        )
    return out


async def _rest_of_history(client: Any, keys: Keys, record_id: str, last: Any) -> list[Any]:
    rows: list[Any] = []
    start = "(" + text(last)
    while True:
        page = await client.xrange(keys.history(record_id), min=start, max="+", count=_HISTORY_PAGE)
        rows += page
        if len(page) < _HISTORY_PAGE:
            return rows
        start = "(" + text(page[-1][0])


async def export_sagas(
    client: Any, keyring: Sequence[Keys], selection: Selection, opener: Sealer | None = None
) -> AsyncIterator[ArchivedSaga]:
    """Every selected saga of each type in ``keyring`` (in that order), after the cursor."""
    after = selection.after
    types = [k.saga_type for k in keyring]
    for keys in keyring:
        skip = after is not None and after.saga_type in types
        if skip and types.index(keys.saga_type) < types.index(after.saga_type):  # type: ignore[union-attr]
            continue
        for p in keys.all_partitions():
            resume = after if after and after.saga_type == keys.saga_type else None
            if resume is not None and p < resume.partition:
                continue
            resume = resume if resume is not None and resume.partition == p else None
            page: list[tuple[str, int]] = []
            async for row in _records(client, keys, p, selection, resume):
                page.append(row)
                if len(page) == _PAGE:
                    for doc in await _lines(client, keys, p, page, opener):
                        yield doc
                    page = []
            for doc in await _lines(client, keys, p, page, opener):
                yield doc


async def _lines(
    client: Any, keys: Keys, p: int, page: list[tuple[str, int]], opener: Sealer | None
) -> list[ArchivedSaga]:
    """A page of (record, created) as lines with their cursors; sagas swept since the
    index was read are left out."""
    if not page:
        return []
    docs = await read_sagas(client, keys, [r for r, _ in page], opener)
    out = []
    for (record_id, created), doc in zip(page, docs, strict=True):
        if doc is not None:
            doc.cursor = ExportCursor(keys.saga_type, p, created, record_id).encode()
            out.append(doc)
    return out


async def _records(
    client: Any, keys: Keys, p: int, selection: Selection, after: ExportCursor | None
) -> AsyncIterator[tuple[str, int]]:
    """(record, created ms) of a partition, oldest first, a page at a time, from the user's
    index with --user (scored by creation too) or the created index."""
    index = keys.user_index(p, selection.user_id) if selection.user_id else keys.created_index(p)
    low, last = selection.since_ms, ""
    if after is not None:
        low, last = max(low, after.created_ms), after.record_id
    offset = 0
    while True:
        rows = await client.zrangebyscore(
            index, low, "+inf", start=offset, num=_PAGE, withscores=True
        )
        if not rows:
            return
        fresh = False
        for member, score in rows:
            record, created = text(member), int(score)
            if (created, record) <= (low, last):
                continue  # at the cursor's time, at or before its record
            fresh = True
            yield record, created
            low, last = created, record
        if len(rows) < _PAGE:
            return
        # Next page from the last one's time; only ties at that time are skipped again.
        offset = 0 if fresh else offset + _PAGE


def encode_line(doc: ArchivedSaga) -> bytes:
    return msgspec.json.encode(doc) + b"\n"


_DECODER = msgspec.json.Decoder(ArchivedSaga)


def decode_line(line: bytes) -> ArchivedSaga:
    return _DECODER.decode(line)


def resume_point(path: str) -> tuple[str, int]:
    """Where a partial export resumes: the cursor of its last whole line ("" for none) and
    the size up to that line's end (a line cut by the interruption is dropped there). Read
    from the end, so resuming a large file costs a line."""
    import os

    with open(path, "rb") as f:
        size = f.seek(0, os.SEEK_END)
        tail, at = b"", size
        while at > 0:
            step = min(65536, at)
            at -= step
            f.seek(at)
            tail = f.read(step) + tail
            end = tail.rfind(b"\n")
            if end < 0:
                continue
            start = tail.rfind(b"\n", 0, end) + 1
            if start > 0 or at == 0:
                line = tail[start:end]
                return (decode_line(line).cursor if line.strip() else "", at + end + 1)
        return "", 0
