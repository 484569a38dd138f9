"""The two shapes of a history event in a record's history stream, and the one reading.

Schema 2 (``includes/history.lua``): the event is ONE stream field, ``p``, holding a
msgpack array ``[name, value, name, value, ...]`` — one field/value pair for the server
to parse, store, propagate to the AOF and replicas, and one listpack element that every
entry of a stream node shares the name of (a stream stores an entry with its node's
first entry's field names as a flag). Schema 1 and before: each name and value is a
stream field of its own. Every reader goes through ``event_fields``, which reads both:
entries of both shapes sit side by side in a history until ``saga migrate`` has
repacked the old ones (state/migrate_history.py), and archives hold the unpacked names.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from typing import Any

import msgspec

PACKED = b"p"
"""The one stream field of a packed event."""

_DECODE = msgspec.msgpack.Decoder(list[Any])
_ENCODE = msgspec.msgpack.Encoder()


def is_packed(fields: dict[bytes, bytes]) -> bool:
    return len(fields) == 1 and PACKED in fields


def event_fields(fields: dict[bytes, bytes]) -> dict[bytes, bytes]:
    """An event's names and values (bytes both), whichever shape it is stored in."""
    if not is_packed(fields):
        return fields
    items = unpack(fields[PACKED])
    return {items[i]: items[i + 1] for i in range(0, len(items) - 1, 2)}


def unpack(raw: bytes) -> list[bytes]:
    """A packed event's flat list, every item as bytes (numbers as their decimal text)."""
    try:
        items = _DECODE.decode(raw)
    except msgspec.DecodeError:  # a value that is not UTF-8: Lua strings are bytes
        items = _lenient(raw)
    return [_as_bytes(v) for v in items]


def pack(fields: Mapping[Any, Any]) -> bytes:
    """The packed shape of an event's names and values (as Lua's cmsgpack writes it)."""
    flat: list[Any] = []
    for name, value in fields.items():
        flat += [_as_text(name), _as_text(value)]
    return _ENCODE.encode(flat)


def _as_bytes(v: Any) -> bytes:
    if isinstance(v, bytes):
        return v
    if isinstance(v, str):
        return v.encode()
    if isinstance(v, float) and v.is_integer():
        return str(int(v)).encode()
    return str(v).encode()


def _as_text(v: Any) -> str | bytes:
    if isinstance(v, bytes):
        try:
            return v.decode()
        except UnicodeDecodeError:
            return v  # msgpack bin: read back as bytes all the same
    return str(v)


def _lenient(raw: bytes) -> list[Any]:
    """The subset of msgpack Lua's cmsgpack writes for a flat array (strings as raw
    bytes, integers, floats, nil and booleans), reading strings as bytes."""
    out: list[Any] = []
    pos = 0

    def take(n: int) -> bytes:
        nonlocal pos
        chunk = raw[pos : pos + n]
        if len(chunk) != n:
            raise ValueError("a packed history event is cut short")
        pos += n
        return chunk

    head = take(1)[0]
    if 0x90 <= head <= 0x9F:
        count = head & 0x0F
    elif head == 0xDC:
        count = struct.unpack(">H", take(2))[0]
    elif head == 0xDD:
        count = struct.unpack(">I", take(4))[0]
    else:
        raise ValueError("a packed history event is not an array")
    fixed = {0xCC: ">B", 0xCD: ">H", 0xCE: ">I", 0xCF: ">Q", 0xD0: ">b", 0xD1: ">h",
             0xD2: ">i", 0xD3: ">q", 0xCA: ">f", 0xCB: ">d"}  # fmt: skip
    for _ in range(count):
        b = take(1)[0]
        if b <= 0x7F or b >= 0xE0:
            out.append(b if b <= 0x7F else b - 0x100)
        elif 0xA0 <= b <= 0xBF:
            out.append(take(b & 0x1F))
        elif b in (0xD9, 0xDA, 0xDB, 0xC4, 0xC5, 0xC6):
            width = {0xD9: 1, 0xC4: 1, 0xDA: 2, 0xC5: 2, 0xDB: 4, 0xC6: 4}[b]
            out.append(take(int.from_bytes(take(width), "big")))
        elif b in fixed:
            fmt = fixed[b]
            out.append(struct.unpack(fmt, take(struct.calcsize(fmt)))[0])
        elif b in (0xC0, 0xC2, 0xC3):
            out.append({0xC0: b"", 0xC2: b"0", 0xC3: b"1"}[b])
        else:
            raise ValueError("a packed history event holds a value of an unknown kind")
    return out
