"""What a bench run is asked to do, and how it fails."""

from __future__ import annotations

from collections.abc import Callable

import msgspec

SYSTEMS = ("saga", "seed", "batched", "minimal")
USERS = 100
"""Distinct user ids across the bench's sagas (the per-user index is a sorted set each)."""
MAX_PAGES_IN_FLIGHT = 1 << 30
"""Bytes of pages the backlog phase may hold at once (sagas x --page-bytes)."""


class BenchConfig(msgspec.Struct, frozen=True, kw_only=True):
    scenario: str = "default"
    """The workload (``saga bench --scenario``)."""
    sagas: int = 1000
    workers: int = 1
    concurrency: int = 64
    rate: float | None = None
    """Sagas/s of the paced phase; None: half the backlog rate; 0: no paced phase."""
    rate_seconds: float = 10.0
    """The paced phase submits rate x this many sagas (at most --sagas)."""
    tracing: bool = False
    trace_ratio: float = 1.0
    """With tracing on: the share of sagas traced (1: every one, ``always_on``; below 1:
    ``traceidratio``, the whole saga in or out, as its trace id decides)."""
    log_level: str = "info"
    page_bytes: int = 0
    """Page text the saga router stores per saga, which the parser loads and deletes
    (the document pipeline's shape); 0: the steps store no pages."""
    only: tuple[str, ...] = SYSTEMS
    cli_runs: int = 10
    recovery: bool = True
    retention_check: bool = True
    """Two short waves with a retention of seconds: is memory bounded after expiry?"""
    private_server: bool = False
    keep_logs: bool = False
    stall_s: float = 60.0
    """Give up when no saga finishes for this long."""


class BenchError(RuntimeError):
    """The bench could not complete a phase."""


Progress = Callable[[str], None]
