"""Encryption at rest of what may hold patient data: page texts, step inputs and
outputs, checkpoints and the document reference (``SAGA_DATA_KEY``, or a ring of keys
with ids, ``SAGA_DATA_KEYS``; AES-256-GCM).

Sealed values are sent to Redis already encrypted, so neither the AOF, a snapshot, a
replica, ``SLOWLOG`` nor ``MONITOR`` sees them in clear; no Lua script reads them. A
sealed value starts with a marker; anything else is read as it is, so turning the key
on needs no migration (older values stay readable). ``cryptography`` is imported only
when a key is set.
"""

from __future__ import annotations

import base64
import binascii
import os
import re
from collections.abc import Sequence
from typing import Any

MARK = b"\x00sg"
"""Prefix of every sealed value: never the start of JSON or of text saga writes."""
LEGACY = b"\x00sg1"
"""A value sealed under ``SAGA_DATA_KEY`` (no key id): ``LEGACY + nonce + ciphertext``."""
RING = b"\x00sg2"
"""A value sealed under a key of ``SAGA_DATA_KEYS``: ``RING + len(id) + id + nonce + ct``."""
LIST = b"\x00sgL"
"""A map's fan-in of sealed item outputs, joined by Lua (which cannot seal):
``LIST`` then netstrings ``<len>:<bytes>`` of the JSON before the list, the JSON after
it, and each item's value (sealed, or ``null``). Opened, it is ``head[a,b,...]tail``
(``state/lua/includes/map_items.lua``, ``fan_in``)."""
_TEXT_MARK = "sg1:"
_KEY_ID = re.compile(r"[A-Za-z0-9_.-]{1,32}")


class SealError(ValueError):
    """A sealed value could not be opened: the wrong SAGA_DATA_KEY, or damaged data."""


def parse_key(raw: str) -> bytes:
    """A base64 key of 16, 24 or 32 bytes (``openssl rand -base64 32``); ValueError else."""
    try:
        key = base64.b64decode(raw, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("SAGA_DATA_KEY must be base64 (e.g. `openssl rand -base64 32`)") from None
    if len(key) not in (16, 24, 32):
        raise ValueError(f"SAGA_DATA_KEY must decode to 16, 24 or 32 bytes, not {len(key)}")
    return key


def parse_keys(raw: str) -> list[tuple[str, bytes]]:
    """``SAGA_DATA_KEYS``: ``id:base64,id:base64,...``, the newest first (it seals; the
    others only open). ValueError naming the first bad entry."""
    out: list[tuple[str, bytes]] = []
    for item in (part.strip() for part in raw.split(",")):
        if not item:
            continue
        key_id, sep, key = item.partition(":")
        if not sep or _KEY_ID.fullmatch(key_id) is None:
            raise ValueError(
                "SAGA_DATA_KEYS must be id:base64-key pairs separated by commas, the newest "
                "first (ids of letters, digits, '_', '.', '-')"
            )
        if key_id in dict(out):
            raise ValueError(f"SAGA_DATA_KEYS names key id {key_id!r} twice")
        try:
            out.append((key_id, parse_key(key)))
        except ValueError as exc:
            raise ValueError(f"SAGA_DATA_KEYS key {key_id!r}: {exc}") from None
    return out


class Sealer:
    """AES-GCM with a random 96-bit nonce per value, under a ring of keys: the first key of
    ``keys`` (``SAGA_DATA_KEYS``, newest first) seals, every key opens what it sealed, and
    ``legacy`` (``SAGA_DATA_KEY``) opens the values sealed before keys had ids — and seals
    when there is no ring. ``Sealer(key)`` is the single legacy key."""

    def __init__(self, legacy: bytes | None = None, *, keys: Sequence[tuple[str, bytes]] = ()):
        from cryptography.exceptions import InvalidTag
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        if legacy is None and not keys:
            raise ValueError("a Sealer needs SAGA_DATA_KEY or SAGA_DATA_KEYS")
        self._legacy: Any = AESGCM(legacy) if legacy is not None else None
        self._ring: dict[str, Any] = {key_id: AESGCM(key) for key_id, key in keys}
        self.current = keys[0][0] if keys else ""
        """The id of the key that seals ("" : the legacy key)."""
        self._head = (RING + bytes([len(self.current)]) + self.current.encode()) if keys else LEGACY
        self._invalid: type[Exception] = InvalidTag

    @property
    def key_ids(self) -> tuple[str, ...]:
        return tuple(self._ring)

    def seal(self, data: bytes) -> bytes:
        if not data:
            return data
        nonce = os.urandom(12)
        aead = self._ring[self.current] if self.current else self._legacy
        return self._head + nonce + bytes(aead.encrypt(nonce, data, None))

    def key_id_of(self, data: bytes) -> str | None:
        """The id of the key that sealed ``data`` ("" for the legacy key), None if clear;
        of a sealed list, its first item's sealed under another key than the current one."""
        if data.startswith(LIST):
            ids = [self.key_id_of(x) for x in list_parts(data)[2]]
            ids = [i for i in ids if i is not None]
            return next((i for i in ids if i != self.current), ids[0] if ids else None)
        if data.startswith(LEGACY):
            return ""
        if data.startswith(RING) and len(data) > 5:
            return data[5 : 5 + data[4]].decode(errors="replace")
        return None

    def unseal(self, data: bytes) -> bytes:
        if data.startswith(LIST):
            head, tail, items = list_parts(data)
            return head + b"[" + b",".join(self.unseal(x) for x in items) + b"]" + tail
        if data.startswith(LEGACY):
            aead, body, key_id = self._legacy, data[4:], "SAGA_DATA_KEY"
        elif data.startswith(RING) and len(data) > 5:
            n = data[4]
            key_id = data[5 : 5 + n].decode(errors="replace")
            aead, body = self._ring.get(key_id), data[5 + n :]
            key_id = f"key {key_id!r} of SAGA_DATA_KEYS"
        else:
            return data
        if aead is None:
            raise SealError(f"a value is sealed under {key_id}, which is not configured")
        try:
            return bytes(aead.decrypt(body[:12], body[12:], None))
        except self._invalid:
            raise SealError(f"a sealed value could not be opened: is {key_id} right?") from None

    def stale(self, data: bytes) -> bool:
        """Sealed, and not under the key that seals now: ``saga keys rotate`` re-seals it."""
        key_id = self.key_id_of(data)
        return key_id is not None and key_id != self.current

    def reseal(self, data: bytes) -> bytes:
        """``data`` sealed under the current key (as it is when already so, or clear); a
        sealed list keeps its shape, each item resealed."""
        if data.startswith(LIST):
            head, tail, items = list_parts(data)
            return list_join(head, tail, [self.reseal(x) for x in items])
        return self.seal(self.unseal(data)) if self.stale(data) else data

    def seal_text(self, text: str) -> str:
        """A str field inside JSON (e.g. a cached LLM answer): sealed, then base64."""
        return _TEXT_MARK + base64.b64encode(self.seal(text.encode())).decode()

    def unseal_text(self, text: str) -> str:
        if not text.startswith(_TEXT_MARK):
            return text
        return self.unseal(base64.b64decode(text[len(_TEXT_MARK) :])).decode()

    @staticmethod
    def is_sealed_text(text: str) -> bool:
        return text.startswith(_TEXT_MARK)

    def text_stale(self, text: str) -> bool:
        if not text.startswith(_TEXT_MARK):
            return False
        try:
            return self.stale(base64.b64decode(text[len(_TEXT_MARK) :]))
        except (binascii.Error, ValueError):
            return False

    def reseal_text(self, text: str) -> str:
        return self.seal_text(self.unseal_text(text)) if self.text_stale(text) else text


def list_parts(data: bytes) -> tuple[bytes, bytes, list[bytes]]:
    """A sealed list's JSON head, tail and items (``LIST``); SealError if damaged."""
    parts, at = [], len(LIST)
    for _ in range(1002):  # head, tail and at most 1000 items (a map's most)
        if at >= len(data):
            break
        colon = data.find(b":", at, at + 12)
        if colon < 0 or not data[at:colon].isdigit():
            raise SealError("a sealed list is damaged")
        end = colon + 1 + int(data[at:colon])
        parts.append(data[colon + 1 : end])
        at = end
    if len(parts) < 2 or at != len(data):
        raise SealError("a sealed list is damaged")
    return parts[0], parts[1], parts[2:]


def list_join(head: bytes, tail: bytes, items: Sequence[bytes]) -> bytes:
    """The ``LIST`` value of these parts (``list_parts``' inverse)."""
    return LIST + b"".join(b"%d:%s" % (len(x), x) for x in (head, tail, *items))


def sealer_of(data_key: str, data_keys: str) -> Sealer | None:
    """The keyspace's cipher from the two settings (None: values stored in clear)."""
    if not data_key and not data_keys:
        return None
    legacy = parse_key(data_key) if data_key else None
    return Sealer(legacy, keys=parse_keys(data_keys) if data_keys else ())


DETAIL_SEP = "\x1e"
"""Between a stored error's message and its sealed detail (ASCII record separator)."""


def error_field(message: str, detail: str, sealer: Sealer | None) -> str:
    """The stored error (``em``): the message everyone may see, then, with a data key
    only, the operator's detail sealed. Without a key the detail is not stored at all:
    in clear it would be exactly what the message leaves out (a path, a URL)."""
    message = message.replace(DETAIL_SEP, " ")
    if sealer is None or not detail:
        return message
    return message + DETAIL_SEP + sealer.seal_text(detail)


def error_message(field: str) -> str:
    """The part of a stored error that anyone may see (readers of ``em``, ``x``)."""
    return field.partition(DETAIL_SEP)[0]


def error_detail(field: str, sealer: Sealer | None) -> str:
    """The operator's detail of a stored error, opened; "" without one or without a key."""
    sealed = field.partition(DETAIL_SEP)[2]
    if not sealed or sealer is None:
        return ""
    try:
        return sealer.unseal_text(sealed)
    except (SealError, ValueError):  # a damaged or foreign value: the message still stands
        return ""
