"""Encryption at rest of what may hold patient data: page texts, step inputs and
outputs, checkpoints and the document reference (``SAGA_DATA_KEY``, AES-256-GCM).

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
from typing import Any

MARK = b"\x00sg1"
"""Prefix of a sealed value: never the start of JSON or of text saga writes."""
_TEXT_MARK = "sg1:"


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


class Sealer:
    """AES-GCM with a random 96-bit nonce per value: ``MARK + nonce + ciphertext+tag``."""

    def __init__(self, key: bytes) -> None:
        from cryptography.exceptions import InvalidTag
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        self._aead: Any = AESGCM(key)
        self._invalid: type[Exception] = InvalidTag

    def seal(self, data: bytes) -> bytes:
        if not data:
            return data
        nonce = os.urandom(12)
        return MARK + nonce + bytes(self._aead.encrypt(nonce, data, None))

    def unseal(self, data: bytes) -> bytes:
        if not data.startswith(MARK):
            return data
        try:
            return bytes(self._aead.decrypt(data[4:16], data[16:], None))
        except self._invalid:
            raise SealError("a sealed value could not be opened: is SAGA_DATA_KEY right?") from None

    def seal_text(self, text: str) -> str:
        """A str field inside JSON (e.g. a cached LLM answer): sealed, then base64."""
        return _TEXT_MARK + base64.b64encode(self.seal(text.encode())).decode()

    def unseal_text(self, text: str) -> str:
        if not text.startswith(_TEXT_MARK):
            return text
        return self.unseal(base64.b64decode(text[len(_TEXT_MARK) :])).decode()


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
