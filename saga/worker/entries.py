"""Parsing ready-stream entries; anything malformed is named, never raised."""

from __future__ import annotations

import msgspec

from saga.state.errors import InvalidIdError
from saga.state.ids import validate_id
from saga.state.model import SCHEMA_VERSION


class ReadyEntry(msgspec.Struct, frozen=True):
    entry_id: str
    record_id: str
    epoch: int


class Malformed(msgspec.Struct, frozen=True):
    entry_id: str
    reason: str


def parse_entry(entry_id: str, fields: dict[bytes, bytes]) -> ReadyEntry | Malformed:
    """A ready entry carries ``rid``, ``ep`` and ``v``; say exactly what is wrong otherwise."""
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
    if not f["v"].isdigit() or int(f["v"]) != SCHEMA_VERSION:
        return Malformed(entry_id, f"unknown entry schema version {f['v'][:20]!r}")
    if not f["ep"].isdigit():
        return Malformed(entry_id, f"epoch {f['ep'][:20]!r} is not a number")
    try:
        validate_id(f["rid"], "record_id")
    except InvalidIdError as exc:
        return Malformed(entry_id, str(exc)[:200])
    return ReadyEntry(entry_id, f["rid"], int(f["ep"]))
