"""The JSON documents of the commands an operator types all day (``saga start``,
``show``, ``list``); registered in ``saga.cli.shapes.SHAPES``.

Apart from ``shapes.py`` so that these commands' start-up imports only what their
documents hold: the registry imports every other command's types (the review,
budgets, archive, breaker and structlog modules, ~130 ms on a cold process).
"""

from __future__ import annotations

from typing import Any

import msgspec

from saga.cli.attempts import Attempt
from saga.cli.timeline import SagaView
from saga.state.model import HistoryEvent, SagaState


class StartDocument(msgspec.Struct, kw_only=True):
    """``saga start --json``, with or without ``--wait``."""

    created: bool
    """False when the record already had this saga (start is idempotent)."""
    saga: SagaView
    """The saga as started; with ``--wait``, as it ended (or stood at ``--timeout``)."""


class ShowDocument(msgspec.Struct, kw_only=True):
    """``saga show --json``: the saga, its attempts and its raw history events."""

    saga: SagaView
    attempts: list[Attempt]
    events: list[HistoryEvent]


class ShowOutputDocument(ShowDocument, kw_only=True):
    """``saga show --output --json``: also what each step produced."""

    outputs: dict[str, Any]
    """Step -> its output as the step returned it (``steps/models.py`` for the document
    pipeline's steps)."""
    undone_outputs: dict[str, Any]
    """Step -> the output it had committed before a compensation undid it."""


class SagaSummary(msgspec.Struct, kw_only=True):
    """A row of ``saga list``: the saga's fields under the names ``saga show`` uses."""

    record_id: str
    user_id: str
    state: SagaState
    step: str
    step_attempts: int
    """Attempts at the current step in the current epoch."""
    created_ms: int
    updated_ms: int
    total_cost: float
    error_class: str
    error_message: str
    needs_review: bool
    review_reason: str
    """``"<step>: <reason>"`` of the first step that flagged it for review; "" if none."""
    parked_reason: str
    """``budget`` or ``circuit`` when it waits with its attempt refunded (``saga list
    --state parked``); "" otherwise."""


class ListDocument(msgspec.Struct, kw_only=True):
    """``saga list --json``: newest first."""

    sagas: list[SagaSummary]
    skipped: int = 0
    """Index entries skipped because their record id is malformed (not a saga's)."""
