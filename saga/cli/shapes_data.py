"""The JSON documents of the data-lifecycle commands (``saga retention``, ``purge``,
``export``, ``import``, ``keys``); registered in ``saga.cli.shapes.SHAPES``."""

from __future__ import annotations

import msgspec

from saga.state.purge import RecordPurge


class RetentionRow(msgspec.Struct, kw_only=True):
    state: str
    """A terminal state, or ``needs_review`` (completed, a result flagged for review)."""
    days: float | None
    """Its retention in days; null: kept until purged."""


class RetentionDocument(msgspec.Struct, kw_only=True):
    """``saga retention show --json``: the retention of each terminal state and what the
    retired sets hold."""

    saga_type: str
    retention: list[RetentionRow]
    scheduled: int
    """Ended sagas waiting for their retention's end."""
    due: int
    """Of those, the ones the next sweep deletes."""
    next_due_ms: int
    archive_dir: str
    """``SAGA_ARCHIVE_DIR``: where the sweep writes sagas before deleting them ("" none)."""


class PurgeReport(msgspec.Struct, kw_only=True):
    """``saga purge --json``: what was deleted (``applied``), or would be (a dry run)."""

    applied: bool
    user_id: str
    """The user purged ("" for one record)."""
    records: list[RecordPurge]
    ledger_fields: int = 0
    """The user's cost ledger fields moved to '~erased' (amounts kept)."""
    user_keys: int = 0
    """The user's budget and cached billing key."""
