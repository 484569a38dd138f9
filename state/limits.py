"""Bounds the state machine applies to what it stores."""

from __future__ import annotations

import msgspec


class StateLimits(msgspec.Struct, frozen=True, kw_only=True):
    history_maxlen: int = 10_000
    """History events kept per record (approximate cap; a saga rarely needs 50)."""
    pages_ttl_s: int = 3600
    """How long the pages blob lives if the parser never commits."""
    retention_s: int = 7 * 24 * 3600
    """How long a completed saga's hash and history are kept."""
