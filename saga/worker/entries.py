"""Parsing ready-stream entries; anything malformed is named, never raised."""

from __future__ import annotations

import msgspec

from saga.state.errors import InvalidIdError
from saga.state.ids import is_safe_id, validate_id
from saga.state.model import SCHEMA_VERSION


class ReadyEntry(msgspec.Struct, frozen=True):
    entry_id: str
    record_id: str
    epoch: int


class Malformed(msgspec.Struct, frozen=True):
    entry_id: str
    reason: str
    record_id: str = ""
    """The record the entry names, when that much is valid (its saga may wait on it)."""


class Newer(msgspec.Struct, frozen=True):
    """An entry written by a newer release (``v`` above ours): left pending for a newer
    worker to take over after the lease, never quarantined (a rolling upgrade)."""

    entry_id: str
    version: int


def parse_entry(entry_id: str, fields: dict[bytes, bytes]) -> ReadyEntry | Malformed | Newer:
    """A ready entry carries ``rid``, ``ep`` and ``v``; say exactly what is wrong otherwise.
    Versions 1..SCHEMA_VERSION are read (a newer release reads older entries)."""
    if fields and len(fields) == 3:  # the usual entry: decode the three fields only
        try:
            rid_b, ep_b, v_b = fields[b"rid"], fields[b"ep"], fields[b"v"]
        except KeyError:
            pass
        else:
            if v_b == _OURS and ep_b.isdigit():
                rid = rid_b.decode("utf-8", "replace")
                if is_safe_id(rid):
                    return ReadyEntry(entry_id, rid, int(ep_b))
    return _parse_slowly(entry_id, fields)


_OURS = str(SCHEMA_VERSION).encode()


def _parse_slowly(entry_id: str, fields: dict[bytes, bytes]) -> ReadyEntry | Malformed | Newer:
    raw = {k: v for k, v in fields.items()} if fields else {}
    if not raw:
        return Malformed(entry_id, "entry has no fields")
    try:
        f = {k.decode("utf-8"): v.decode("utf-8") for k, v in raw.items()}
    except UnicodeDecodeError:
        return Malformed(entry_id, "entry fields are not valid UTF-8")
    missing = [name for name in ("rid", "ep", "v") if name not in f]
    if missing:
        return Malformed(entry_id, f"entry lacks field(s) {', '.join(missing)}")
    try:
        validate_id(f["rid"], "record_id")
    except InvalidIdError as exc:
        return Malformed(entry_id, str(exc)[:200])
    rid, v = f["rid"], f["v"]
    if v.isdigit() and int(v) > SCHEMA_VERSION and len(v) < 6:
        return Newer(entry_id, int(v))
    if not v.isdigit() or int(v) < 1:
        return Malformed(entry_id, f"unknown entry schema version {v[:20]!r}", rid)
    if not f["ep"].isdigit():
        return Malformed(entry_id, f"epoch {f['ep'][:20]!r} is not a number", rid)
    return ReadyEntry(entry_id, rid, int(f["ep"]))
