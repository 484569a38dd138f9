"""Data key rotation (``saga keys rotate`` / ``saga keys status``): every value sealed under
an older key of ``SAGA_DATA_KEYS`` (or under the legacy ``SAGA_DATA_KEY``) sealed again
under the newest, while workers run.

The keyspace is walked with SCAN (a key present for the whole walk is met at least once,
however the keyspace changes), ``_SCAN`` keys a call: saga hashes field by field and
strings (pages blobs, cached LLM answers) with a compare-and-set (``reseal_values``), so a
value a worker wrote meanwhile — under the newest key already — is never overwritten;
histories and dead-letter streams, whose entries cannot change in place, are copied to a
scratch stream and swapped in (``reseal_stream``). Ready, delayed and quarantine keys hold
no sealed values and are never rewritten (a ready stream's consumer group would be lost).
A value a pass could not reseal (it changed, a stream was trimmed) is met again by the
next pass; ``rotate`` repeats passes until one finds nothing stale.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

import msgspec
from redis.exceptions import ResponseError

from saga.state.codes import RC, to_code
from saga.state.history_codec import PACKED, event_fields, is_packed, pack
from saga.state.keys import Keys
from saga.state.replies import text
from saga.state.scripts import evalsha
from saga.state.sealing import MARK, Sealer

_SCAN = 500
_CALL = 256
_STREAM_PAGE = 512
_SEALED_TEXT = re.compile(rb"sg1:[A-Za-z0-9+/]+=*")
_STREAMS = ("hist", "dead")
_STRINGS = ("pages", "llm")


class RotationReport(msgspec.Struct, kw_only=True):
    """What a pass found sealed under keys other than the newest, and what it resealed."""

    current: str
    """The id of the key that seals now ("" : the legacy SAGA_DATA_KEY)."""
    stale: dict[str, int] = {}
    """Values found under each older key id ("" : the legacy key)."""
    resealed: int = 0
    """Values written back under the current key (hash fields, strings, stream entries)."""
    left: int = 0
    """Values a worker changed (or a stream that changed) meanwhile: the next pass."""
    keys_walked: int = 0
    passes: int = 0


def resealed(sealer: Sealer, raw: bytes, stale: Counter[str] | None = None) -> bytes:
    """``raw`` with every value sealed under an older key sealed under the current one: a
    whole sealed value, or sealed texts inside text (an error's detail, a cached answer's
    JSON). ``stale`` counts them by key id."""
    if raw.startswith(MARK):
        if not sealer.stale(raw):
            return raw
        if stale is not None:
            stale[sealer.key_id_of(raw) or ""] += 1
        return sealer.reseal(raw)
    if b"sg1:" not in raw:
        return raw

    def one(m: re.Match[bytes]) -> bytes:
        token = m.group().decode()
        if not sealer.text_stale(token):
            return m.group()
        if stale is not None:
            import base64

            stale[sealer.key_id_of(base64.b64decode(token[4:])) or ""] += 1
        return sealer.reseal_text(token).encode()

    return _SEALED_TEXT.sub(one, raw)


async def rotate(client: Any, keys: Keys, *, apply: bool = True, passes: int = 5) -> RotationReport:
    """Passes over the keyspace until one finds nothing stale (at most ``passes``); with
    ``apply=False`` one pass that only counts. The report is the last pass's ``stale``
    (what was left when it began) and the totals resealed."""
    sealer = keys.sealer
    if sealer is None:
        raise ValueError("no data key is set: SAGA_DATA_KEYS names the keys to rotate to")
    total = RotationReport(current=sealer.current)
    for n in range(1, (passes if apply else 1) + 1):
        report = await _pass(client, keys, sealer, apply=apply)
        total.passes, total.stale = n, report.stale
        total.resealed += report.resealed
        total.left, total.keys_walked = report.left, report.keys_walked
        if not report.stale or not apply:
            break
    if apply and total.stale:  # the last pass resealed them: count what is left now
        total.stale = (await _pass(client, keys, sealer, apply=False)).stale
    return total


async def _pass(client: Any, keys: Keys, sealer: Sealer, *, apply: bool) -> RotationReport:
    report = RotationReport(current=sealer.current)
    stale: Counter[str] = Counter()
    async for raw in client.scan_iter(match=keys.every_partitioned_pattern(), count=_SCAN):
        key = text(raw)
        kind = keys.kind_of(key)
        report.keys_walked += 1
        if kind == "saga":
            await _hash(client, sealer, key, stale, report, apply)
        elif kind in _STRINGS:
            await _string(client, sealer, key, stale, report, apply)
        elif kind in _STREAMS:
            await _stream(client, keys, sealer, key, stale, report, apply)
    report.stale = dict(stale)
    return report


async def _hash(
    client: Any, sealer: Sealer, key: str, stale: Counter[str], report: Any, apply: bool
) -> None:
    triples: list[Any] = []
    for field, value in (await client.hgetall(key)).items():
        new = resealed(sealer, value, stale)
        if new != value:
            triples += [field, value, new]
    if not apply:
        return
    for at in range(0, len(triples), 3 * _CALL):
        chunk = triples[at : at + 3 * _CALL]
        reply = await evalsha(client, "reseal_values", [key], ["hash", len(chunk) // 3, *chunk])
        report.resealed += int(reply[1])
        report.left += int(reply[2])


async def _string(
    client: Any, sealer: Sealer, key: str, stale: Counter[str], report: Any, apply: bool
) -> None:
    try:
        value = await client.get(key)
    except ResponseError:  # not a string (WRONGTYPE): nothing of ours to reseal
        return
    if value is None:
        return
    new = resealed(sealer, value, stale)
    if new == value or not apply:
        return
    reply = await evalsha(client, "reseal_values", [key], ["string", 1, value, new])
    report.resealed += int(reply[1])
    report.left += int(reply[2])


async def _pages(client: Any, key: str) -> Any:
    start = "-"
    while True:
        rows = await client.xrange(key, min=start, max="+", count=_STREAM_PAGE)
        if rows:
            yield rows
        if len(rows) < _STREAM_PAGE:
            return
        start = "(" + text(rows[-1][0])


async def _stream(
    client: Any,
    keys: Keys,
    sealer: Sealer,
    key: str,
    stale: Counter[str],
    report: Any,
    apply: bool,
) -> None:
    """Count the stream's stale entries a page at a time; if there are any (and
    ``apply``), copy every entry resealed to its scratch stream, then swap."""
    found = Counter[str]()
    async for rows in _pages(client, key):
        for _, fields in rows:
            for value in event_fields(fields).values():
                resealed(sealer, value, found)
    stale.update(found)
    if not found or not apply:
        return
    scratch = keys.reseal_scratch(key)
    first, copied, last, fixed = True, 0, "", 0
    async for rows in _pages(client, key):
        args: list[Any] = ["copy", "1" if first else "0", len(rows)]
        for entry_id, fields in rows:
            # a packed event (state/history_codec.py) is opened, resealed and packed again:
            # a sealed text inside its one value is not at a fixed place
            flat = event_fields(fields)
            new_fields = {name: resealed(sealer, value) for name, value in flat.items()}
            fixed += sum(new_fields[n] != v for n, v in flat.items())
            if is_packed(fields):
                new_fields = {PACKED: pack(new_fields)}
            args += [entry_id, len(new_fields)]
            for name, value in new_fields.items():
                args += [name, value]
        await evalsha(client, "reseal_stream", [key, scratch], args)
        first, copied, last = False, copied + len(rows), text(rows[-1][0])
    reply = await evalsha(client, "reseal_stream", [key, scratch], ["swap", last, copied])
    if to_code(reply[0]) == RC.CONFLICT:
        report.left += fixed
    else:
        report.resealed += fixed
