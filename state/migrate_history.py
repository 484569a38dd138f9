"""Schema 2's migration: every history event of the old shape (one stream field per
name) repacked into schema 2's one field (state/history_codec.py), online.

A batch walks ``batch`` records of one partition's created index (ZSCAN: a record there
for the whole walk is visited once at least; one made during it is written packed
already) and rewrites each history holding an old-shape event with the script
``saga keys rotate`` uses (``reseal_stream``: a copy under the same ids to a scratch
stream in the slot, then a swap that appends what was written since and refuses if an
entry was deleted or trimmed meanwhile). Workers keep running: an event appended during
the copy is carried over by the swap as it was written; a swap refused three
times leaves the history as it was (readers read both shapes). Packed events are
copied unchanged, so a batch run twice rewrites nothing the second time, and a run
killed anywhere (between batches, or between a copy and its swap: the scratch expires,
and the next copy empties it first) resumes at its stored cursor.

The cursor is ``"<partition>:<ZSCAN cursor>"``.
"""

from __future__ import annotations

from typing import Any

from saga.state.codes import RC, to_code
from saga.state.history_codec import PACKED, is_packed, pack
from saga.state.keys import Keys
from saga.state.replies import text
from saga.state.scripts import evalsha

_PAGE = 512
"""Entries one reseal_stream copy call carries (its cap)."""


async def pack_histories(
    client: Any, keys: Keys, cursor: str, batch: int, apply: bool
) -> tuple[int, str]:
    """One batch: (histories repacked, or in a dry run holding old events; next cursor,
    "" when every partition is done)."""
    part, _, at = (cursor or "0:0").partition(":")
    p = int(part)
    nxt, members = await client.zscan(keys.created_index(p), int(at or 0), count=batch)
    changed = 0
    for raw, _ in members:
        if await _repack(client, keys, keys.history(text(raw)), apply):
            changed += 1
    if int(nxt) != 0:
        return changed, f"{p}:{nxt}"
    return changed, f"{p + 1}:0" if p + 1 < keys.partitions else ""


async def _repack(client: Any, keys: Keys, hist: str, apply: bool) -> bool:
    """Whether ``hist`` holds an old-shape event (and, if ``apply``, rewrite it packed)."""
    pages = await _pages(client, hist)
    if not any(not is_packed(f) for page in pages for _, f in page):
        return False
    if not apply:
        return True
    for _ in range(3):  # a swap refused (an entry trimmed meanwhile): read it again
        if await _rewrite(client, keys, hist, pages):
            return True
        pages = await _pages(client, hist)
    return False


async def _rewrite(client: Any, keys: Keys, hist: str, pages: list[list[Any]]) -> bool:
    scratch = keys.reseal_scratch(hist)
    first, copied, last = True, 0, ""
    for rows in pages:
        args: list[Any] = ["copy", "1" if first else "0", len(rows)]
        for entry_id, fields in rows:
            new = fields if is_packed(fields) else {PACKED: pack(fields)}
            args += [entry_id, len(new)]
            for name, value in new.items():
                args += [name, value]
        await evalsha(client, "reseal_stream", [hist, scratch], args)
        first, copied, last = False, copied + len(rows), text(rows[-1][0])
    reply = await evalsha(client, "reseal_stream", [hist, scratch], ["swap", last, copied])
    return to_code(reply[0]) != RC.CONFLICT


async def _pages(client: Any, key: str) -> list[list[Any]]:
    """The whole stream, a page of reseal_stream's cap at a time (a history is capped by
    its MAXLEN: a few pages at most)."""
    out: list[list[Any]] = []
    start = "-"
    while True:
        rows = await client.xrange(key, min=start, max="+", count=_PAGE)
        if rows:
            out.append(rows)
        if len(rows) < _PAGE:
            return out
        start = "(" + text(rows[-1][0])
