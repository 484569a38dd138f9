"""The JSON documents commands print with ``--json``: one Struct per shape.

A saga is printed as the same object everywhere (``SagaView``: ``saga show``,
``saga start``, ``saga start --wait``); a row of ``saga list`` uses the same
names for the same fields. Every shape has a JSON Schema under
``saga/cli/schemas/`` generated from these Structs (``python -m saga.cli.shapes``
writes them; a test fails when they drift, and validates real output against
them). docs/json.md says which command prints which shape. The shapes of ``start``, ``show``
and ``list`` live in ``shapes_saga.py``, so those commands need not import this
registry (and every other command's types) to print one.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import msgspec

from saga.adapters.breaker import BreakerStatus
from saga.cli.shapes_data import PurgeReport, RetentionDocument
from saga.cli.shapes_saga import (
    ListDocument,
    ShowDocument,
    ShowOutputDocument,
    StartDocument,
)
from saga.config.settings import Settings
from saga.controller.check import Check
from saga.documents.review import DecideResult, ReviewView
from saga.state.archive import ArchivedSaga
from saga.state.archive_import import ImportReport
from saga.state.budgets import BudgetStatus
from saga.state.dead_letters import DeadLetter
from saga.state.migrations import MigrateReport
from saga.state.model import HistoryEvent, SagaState
from saga.state.presence import Presence
from saga.state.queries import CostRow, StepStats
from saga.state.repartition import MigrationReport
from saga.state.rotation import RotationReport
from saga.state.schedules import Schedule
from saga.state.signals import SignalResult

SCHEMAS = Path(__file__).with_name("schemas")


class RetryResult(msgspec.Struct, kw_only=True):
    """``saga retry <record> --json``."""

    record_id: str
    step: str
    """The step it re-runs from (the router when its pages expired)."""
    epoch: int
    duplicate: bool
    """The same retry was already applied (an operation id seen before)."""


class RecordError(msgspec.Struct, kw_only=True):
    record_id: str
    error: str


class BulkRetryDocument(msgspec.Struct, kw_only=True):
    """``saga retry --step S --failed --json``: sagas dead-lettered at S."""

    step: str
    dry_run: bool
    matched: list[str]
    """Failed at the step with their dead letter present (what ``saga dlq list`` shows)."""
    retried: list[str]
    errors: list[RecordError]
    without_dead_letter: list[str]
    """Failed at the step, their dead letter purged: left out (``saga retry <record>``)."""


class CancelResult(msgspec.Struct, kw_only=True, omit_defaults=True):
    """``saga cancel --json`` (and ``saga cancel --compensate --json``, which adds
    ``first_undo``)."""

    record_id: str
    previous_state: SagaState
    state: SagaState
    """cancelled; with --compensate, compensating (or compensated: nothing to undo)."""
    first_undo: str = ""
    """With --compensate: the undo step that runs first (``undo:<step>``)."""


class DeadLettersDocument(msgspec.Struct, kw_only=True):
    """``saga dlq list --json`` (newest first) and ``saga dlq show --json``."""

    dead_letters: list[DeadLetter]


class RecordStep(msgspec.Struct, kw_only=True):
    record_id: str
    step: str


class SkippedLetter(msgspec.Struct, kw_only=True):
    record_id: str
    step: str
    reason: str


class StepError(msgspec.Struct, kw_only=True):
    record_id: str
    step: str
    error: str


class ReplayDocument(msgspec.Struct, kw_only=True):
    """``saga dlq replay --json``."""

    dry_run: bool
    replayed: list[RecordStep]
    skipped: list[SkippedLetter]
    """Dead letters whose saga moved on or is gone."""
    errors: list[StepError]


class PurgeDocument(msgspec.Struct, kw_only=True):
    """``saga dlq purge --yes --json``."""

    purged: int
    steps: list[str]


class TopStep(StepStats, frozen=True, kw_only=True):
    type: str = "documents"
    """The saga type the step belongs to (docs/sagas.md)."""
    throughput: float | None
    """Commits per second over the sampling window; None with one sample."""
    undoes: str = ""
    """On an ``undo:<step>`` row (a compensation's queues), the step it undoes; else empty."""


class TopDocument(msgspec.Struct, kw_only=True):
    """``saga top --json``: one document with ``--once``, else one line per refresh."""

    at_ms: int
    window_s: float | None
    steps: list[TopStep]
    breakers: dict[str, BreakerStatus]
    workers: list[Presence]
    """Live workers (presence renewed within 15 s), most recently seen first."""
    timers: int = 0
    """Sagas parked at a wait or a sleep whose timer is set (``{p}:waits``)."""
    next_timer_ms: int = 0
    """The earliest of those timers' due time (epoch ms; 0: none)."""


class CostsDocument(msgspec.Struct, kw_only=True, rename={"from_day": "from", "to_day": "to"}):
    """``saga costs --json``: UTC days, per user and step."""

    from_day: str
    to_day: str
    rows: list[CostRow]
    by_user: dict[str, float]
    total_usd: float
    total_attempts: int


class BudgetsDocument(msgspec.Struct, kw_only=True):
    """``saga budget show --json`` (and ``set --json``): budgets and spend, UTC periods."""

    budgets: list[BudgetStatus]


class BudgetCleared(msgspec.Struct, kw_only=True):
    """``saga budget clear --json``."""

    user_id: str
    cleared: bool
    """False when the user had no budget."""
    woken: int
    """Budget-parked steps sent back to their ready streams."""


class InitDocument(msgspec.Struct, kw_only=True):
    """``saga init --json``."""

    type: str = "documents"
    """The saga type whose groups were made (docs/sagas.md)."""
    steps: list[str]
    partitions: int
    groups_created: int
    scripts_version: str
    budgets_moved: int = 0
    """Budgets moved from an older release's ``saga:budgets`` (docs/operations.md)."""
    console_tokens_dropped: int = 0
    """Console tokens of an older release deleted: they are no longer valid."""


class PartitionsDocument(msgspec.Struct, kw_only=True):
    """``saga partitions show --json``."""

    prefix: str
    stored: int | None
    """The keyspace's partition count; None before ``saga init`` or the first process."""
    migrating_to: int
    """The count ``saga partitions migrate`` is moving records to; 0: none."""
    configured: int
    """This process's ``SAGA_PARTITIONS``."""


class ControllerCheckDocument(msgspec.Struct, kw_only=True):
    """``saga controller --check --json``: is Redis ready for saga."""

    ok: bool
    """No check failed (warnings allowed)."""
    checks: list[Check]


class ReviewAccepted(msgspec.Struct, kw_only=True):
    """``saga review accept --json``."""

    record_id: str
    accepted: bool
    flags_cleared: int
    moved_on_to: str = ""
    """The step a saga waiting at a review gate moved on to ("": it was not at a gate)."""


class ServerStatus(msgspec.Struct, kw_only=True):
    """``saga server status|start|stop --json``: the embedded server after the action."""

    running: bool
    url: str
    data_dir: str
    malloc: str
    """The allocator it runs with; "" when it is not running."""


ConfigDocument = msgspec.defstruct(
    "ConfigDocument",
    [
        *((f.name, str if f.type is Path else f.type) for f in msgspec.structs.fields(Settings)),
        ("scripts_version", str),
    ],
    kw_only=True,
)
"""``saga config --json``: the effective settings (``Settings``), secrets masked
(``***``), paths as strings, and the version of the Lua scripts."""


class ScheduleList(msgspec.Struct, kw_only=True):
    """``saga schedule list --json``: every schedule by name."""

    schedules: list[Schedule]


SHAPES: dict[str, Any] = {
    "start": StartDocument,
    "show": ShowDocument,
    "show-output": ShowOutputDocument,
    "event": HistoryEvent,
    "list": ListDocument,
    "retry": RetryResult,
    "retry-bulk": BulkRetryDocument,
    "cancel": CancelResult,
    "signal": SignalResult,
    "review-accept": ReviewAccepted,
    "review-show": ReviewView,
    "review-decide": DecideResult,
    "dlq-letters": DeadLettersDocument,
    "dlq-replay": ReplayDocument,
    "dlq-purge": PurgeDocument,
    "top": TopDocument,
    "costs": CostsDocument,
    "budget-show": BudgetsDocument,
    "budget-clear": BudgetCleared,
    "init": InitDocument,
    "server": ServerStatus,
    "config": ConfigDocument,
    "controller-check": ControllerCheckDocument,
    "partitions": PartitionsDocument,
    "partitions-migrate": MigrationReport,
    "retention": RetentionDocument,
    "purge": PurgeReport,
    "schedule-list": ScheduleList,
    "export-line": ArchivedSaga,
    "import": ImportReport,
    "keys": RotationReport,
    "migrate": MigrateReport,
}
"""Schema name (``schemas/<name>.json``) → the shape. ``event`` is a line of
``saga show --follow --json``."""
_LAZY = {
    "bench": "saga.bench.report",
    "eval": "saga.evaluation.evaluate",
    "eval-grouping": "saga.evaluation.grouping",
    "doctor": "saga.cli.cmd_doctor_report",
}
"""``saga bench --json`` and ``saga eval [--grouping] --json`` print their own ``Report``: imported
only when their schema is made, to keep the other commands' start-up lean."""
NAMES = (*SHAPES, *_LAZY)
"""Every schema."""


def shape(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return importlib.import_module(_LAZY[name]).Report
    return SHAPES[name]


def schema(name: str) -> dict[str, Any]:
    """The strict JSON Schema of a shape: every field required (commands always print
    every field), no others allowed."""
    out: dict[str, Any] = msgspec.json.schema(shape(name))
    omitting = _omitting_defaults(shape(name))
    for title, definition in out.get("$defs", {}).items():
        if definition.get("type") == "object" and "properties" in definition:
            if title not in omitting:  # omit_defaults Structs leave defaults out
                definition["required"] = sorted(definition["properties"])
                for prop in definition["properties"].values():
                    prop.pop("default", None)
            definition["additionalProperties"] = False
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": name, **out}


def _omitting_defaults(t: Any) -> set[str]:
    """Names of the Structs reachable from ``t`` that are encoded with omit_defaults."""
    from msgspec import inspect

    found: set[str] = set()
    seen: set[int] = set()

    def walk(info: Any) -> None:
        if id(info) in seen:
            return
        seen.add(id(info))
        if isinstance(info, inspect.StructType):
            if info.cls.__struct_config__.omit_defaults:
                found.add(info.cls.__name__)
            for f in info.fields:
                walk(f.type)
        for attr in ("type", "item_type", "key_type", "value_type", "types", "item_types"):
            sub = getattr(info, attr, None)
            for s in sub if isinstance(sub, tuple) else [sub] if sub is not None else []:
                walk(s)

    walk(inspect.type_info(t))
    return found


def rendered(name: str) -> str:
    """The file text of a schema (what ``schemas/<name>.json`` must hold)."""
    return json.dumps(schema(name), indent=2, sort_keys=True) + "\n"


def write_all(folder: Path = SCHEMAS) -> list[Path]:
    folder.mkdir(exist_ok=True)
    paths = []
    for name in NAMES:
        path = folder / f"{name}.json"
        path.write_text(rendered(name))
        paths.append(path)
    return paths


if __name__ == "__main__":
    for p in write_all():
        sys.stdout.write(f"wrote {p}\n")
