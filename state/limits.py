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
    commit_replicas: int = 0
    """``SAGA_COMMIT_DURABILITY=replica`` sets 1: a start, and each batch of commits and
    fails, is acknowledged only once this many replicas have it (one ``WAIT`` per batch
    and node, in the same round trip). 0 (``local``): the primary's word is enough."""
    replica_wait_ms: int = 1000
    """``SAGA_COMMIT_WAIT_MS``: how long that ``WAIT`` waits before the call counts as
    failed (``NotReplicatedError``) and is re-sent with its operation ids."""
