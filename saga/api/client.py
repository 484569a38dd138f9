"""The async client an API backend uses to submit and steer sagas of one type.

It runs the same scripts as the CLI and the executors. ``app.client()`` gives one
for a ``saga.App``; ``from_settings`` one for the document pipeline::

    async with SagaClient.from_settings(load_settings()) as sagas:
        await sagas.start("mr-2024-0001", "user-42", document="s3-proxy://...")
        saga = await sagas.get("mr-2024-0001")
        events = await sagas.history("mr-2024-0001")
        await sagas.retry("mr-2024-0001", step="parser")
        await sagas.cancel("mr-2024-0001")
        await sagas.signal("mr-2024-0001", "approved", data={"by": "ann"})  # @app.wait
        await sagas.accept_review("mr-2024-0001")   # a person checked the flagged results
        await sagas.set_budget("user-42", daily=5.0, monthly=50.0)   # LLM USD per UTC period
        status = await sagas.budget("user-42")       # budget, spend today / this month
        await sagas.clear_budget("user-42")

    async with orders.client() as sagas:               # orders = saga.App("orders")
        await sagas.start("order-1", "user-7", input=Order(sku="A1", qty=2))
"""

from __future__ import annotations

from types import TracebackType
from typing import Any

import msgspec

from saga.api.pipeline import Pipeline
from saga.config.settings import Settings
from saga.state import budgets, operator, partitions, reads, signals, streams
from saga.state.budgets import BudgetStatus
from saga.state.durability import check_durability
from saga.state.errors import InvalidIdError
from saga.state.keys import Keys
from saga.state.machine import StateMachine
from saga.state.model import HistoryEvent, Saga, SagaState
from saga.state.operator import CompensateResult, RetryResult
from saga.state.requests import StartResult
from saga.state.signals import SignalResult
from saga.state.types import TypeInfo, register_type, type_info, type_names

__all__ = ["SagaClient"]


def _no_unread_fields(raw: bytes, input_type: Any, step: str) -> None:
    """Refuse an input with fields its step's Struct does not have: msgspec would drop
    them silently, and the saga would run on something other than what was asked (the
    document pipeline's router without its document)."""
    fields = getattr(input_type, "__struct_encode_fields__", None)
    if fields is None:
        return
    unread = sorted(set(msgspec.json.decode(raw, type=dict[str, Any])) - set(fields))
    if unread:
        raise ValueError(
            f"step {step!r} reads no field {', '.join(map(repr, unread))}; it takes "
            f"{input_type.__name__} ({', '.join(fields) or 'no fields'})"
        )


class _FirstInput(msgspec.Struct, frozen=True):
    document: str = ""


class SagaClient:
    """start / get / history / retry / cancel for one saga type over one keyspace.

    ``pipeline`` is the type's Pipeline (``app.pipeline()``), or just its registered
    steps (a ``TypeInfo``: what the CLI has of a type whose code it lacks). The keys
    are those of the pipeline's type."""

    def __init__(
        self,
        client: Any,
        keys: Keys,
        pipeline: Pipeline | TypeInfo,
        settings: Settings | None = None,
    ) -> None:
        self.redis = client
        self.pipeline = pipeline if isinstance(pipeline, Pipeline) else None
        self.type_info = pipeline.info() if isinstance(pipeline, Pipeline) else pipeline
        self.keys = keys.of_type(self.type_info.name)
        self.sm = StateMachine(client, self.keys, settings.limits if settings else None)
        self._owns_client = False
        self._groups_ready = False

    @classmethod
    def from_settings(cls, settings: Settings, pipeline: Pipeline | None = None) -> SagaClient:
        """A client of ``pipeline``'s type (default: this deployment's, the document
        pipeline unless SAGA_PIPELINE names another) that closes its connection."""
        from saga.wiring.runtime import document_pipeline, keys_of, open_client

        self = cls(
            open_client(settings),
            keys_of(settings),
            pipeline or document_pipeline(settings),
            settings,
        )
        self._owns_client = True
        return self

    @classmethod
    async def for_type(cls, settings: Settings, saga_type: str | None) -> SagaClient:
        """A client of the registered type ``saga_type``, from the registry of types (the
        CLI's ``--type``); None or this deployment's own type is ``from_settings``."""
        from saga.wiring.runtime import document_pipeline

        own = document_pipeline(settings)
        if saga_type is None or saga_type == own.name:
            return cls.from_settings(settings, own)
        self = cls.from_settings(settings, own)
        found = await type_info(self.redis, self.keys, saga_type)
        if found is None:
            known = ", ".join(await type_names(self.redis, self.keys)) or "none"
            await self.aclose()
            raise InvalidIdError(
                f"no saga type {saga_type!r} is registered (registered: {known}); "
                "a worker or client of the type registers it"
            )
        self.type_info, self.pipeline = found, None
        self.keys = self.keys.of_type(found.name)
        self.sm = StateMachine(self.redis, self.keys, settings.limits)
        return self

    async def __aenter__(self) -> SagaClient:
        await partitions.guard(self.redis, self.keys)  # SAGA_PARTITIONS as stored, or refuse
        return self

    async def __aexit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._owns_client:
            await self.redis.aclose()

    async def start(
        self,
        record_id: str,
        user_id: str,
        *,
        document: str = "",
        input: Any = None,
        trace: str = "",
        priority: int = 0,
    ) -> StartResult:
        """Create the saga and enqueue its first step; the same call again is a no-op.

        ``document`` reaches the first step as given: a local path should be absolute,
        since workers run in other directories (``saga start`` makes it so).

        ``input`` is the first step's input (a Struct of its input type, or JSON bytes
        of an object); without it the input is ``{"document": document}``, the
        document pipeline's. ``trace`` is a W3C traceparent to run the saga's steps
        under; by default the saga gets its own trace (a ``saga <record_id>`` span,
        under the caller's current span if there is one) when tracing is on.
        ``priority`` (0-9): above 0, the saga's first step is claimed before priority-0
        sagas waiting there, each held back at most ``SAGA_PRIORITY_AGE_BOOST``
        (docs/sagas.md, "Priorities")."""
        from saga.telemetry import tracing  # imports OpenTelemetry only when tracing is on

        first = self._first_input(document, input)
        if not self._groups_ready:  # once per client: groups must exist at ID 0 first
            await partitions.guard(self.redis, self.keys)
            await check_durability(self.redis, self.sm.limits)
            await streams.ensure_groups(self.redis, self.keys, self.type_info.steps)
            await register_type(self.redis, self.keys, self.type_info)
            self._groups_ready = True
        step = self.type_info.first
        ready = self.keys.ready(self.keys.partition_of(record_id), step)
        with tracing.saga_span(record_id, user_id, ready) if not trace else tracing.NO_SPAN as span:
            result = await self.sm.start(
                record_id,
                user_id,
                step,
                input_json=first,
                document=document,
                trace=trace or tracing.traceparent_of(span),
                priority=priority,
            )
            span.set("saga.created", result.created)
        return result

    def _first_input(self, document: str, value: Any) -> bytes:
        """The first step's input as JSON, checked against its type when it is known."""
        if value is None:
            return msgspec.json.encode(_FirstInput(document=document))
        if document:
            raise ValueError("give the saga's document= or its input=, not both")
        raw = value if isinstance(value, bytes) else msgspec.json.encode(value)
        try:
            if self.pipeline is None:
                msgspec.json.decode(raw, type=dict[str, Any])
            else:
                msgspec.json.decode(raw, type=self.pipeline.first.input_type)
                _no_unread_fields(raw, self.pipeline.first.input_type, self.type_info.first)
        except (msgspec.ValidationError, msgspec.DecodeError) as exc:
            want = "a JSON object" if self.pipeline is None else (
                self.pipeline.first.input_type.__name__)  # fmt: skip
            raise ValueError(
                f"the input does not fit step {self.type_info.first!r}, which takes {want}: {exc}"
            ) from None
        return raw

    async def get(self, record_id: str) -> Saga:
        return await reads.get_saga(self.redis, self.keys, record_id)

    async def history(self, record_id: str) -> list[HistoryEvent]:
        return await reads.get_history(self.redis, self.keys, record_id)

    async def retry(
        self, record_id: str, *, step: str | None = None, force: bool = False, actor: str = "api"
    ) -> RetryResult:
        """Re-run from ``step`` (default: the step the saga is at), keeping history.

        A step that reads the pages blob cannot re-run once the blob is gone (the
        parser deletes it when it commits): the saga then re-runs from the step
        before it, which fetches the document again. ``RetryResult.step`` says which.
        """
        if step is None:
            saga = await self.get(record_id)
            if saga.state == SagaState.COMPENSATION_FAILED:  # the undos left run again
                done = await self.compensate(record_id, actor=actor)
                return RetryResult(epoch=saga.epoch + 1, entry_id="", step=done.step)
            step = saga.step
        info = self.type_info
        info.index(step)  # an unknown step: KeyError naming the steps
        step = info.retry_from(step)  # a branch re-runs from the step it branches from
        while step in info.loads_pages and info.prev_of(step) != "_input":
            if await self.redis.exists(self.keys.pages(record_id)):
                break
            step = info.prev_of(step)
        return await operator.retry(
            self.sm,
            record_id,
            step,
            info.prev_of(step),
            force=force,
            actor=actor,
            steps=info.steps,
        )

    async def accept_review(
        self, record_id: str, *, actor: str = "api", op: str | None = None
    ) -> int:
        """A person checked the results a step flagged and accepts them: the flags are
        cleared (the saga leaves ``saga list --review``) and who did it is in history; a
        saga waiting at a review gate moves on. ``op``: an id that makes a re-send a no-op."""
        steps = self.type_info.steps
        return await operator.accept_review(self.sm, record_id, steps, actor=actor, op=op)

    async def cancel(self, record_id: str, *, actor: str = "api") -> str:
        return await operator.cancel(self.sm, record_id, actor=actor)

    async def signal(
        self, record_id: str, event: str, *, data: Any = None, signal_id: str = ""
    ) -> SignalResult:
        """Deliver ``event`` to a saga's ``@app.wait``: ``data`` (a Struct or anything
        msgspec encodes; None: ``{}``) becomes the wait's output. Sent before the saga
        gets there, it is kept until it does; the same ``signal_id`` twice is a no-op."""
        self.type_info.check_event(event)  # UnknownEventError: no wait of the type waits for it
        raw = data if isinstance(data, bytes) else msgspec.json.encode({} if data is None else data)
        return await signals.signal(self.sm, record_id, event, data=raw, signal_id=signal_id)

    async def compensate(self, record_id: str, *, actor: str = "api") -> CompensateResult:
        """Stop the saga and undo its committed steps, latest first (``saga cancel
        --compensate``); from compensation_failed, the undos left run again."""
        return await operator.compensate(self.sm, record_id, self.type_info.undoable, actor=actor)

    # -- budgets (shared by every saga type of the keyspace) -------------------
    async def set_budget(
        self, user_id: str, *, daily: float | None = None, monthly: float | None = None
    ) -> BudgetStatus:
        """Set a user's LLM budget (USD per UTC day and/or month; None: no limit). When
        the new budget is not spent yet, the user's budget-parked steps run again now."""
        if daily is None and monthly is None:
            raise InvalidIdError("a budget needs a daily or a monthly limit")
        budget = budgets.Budget(daily=daily, monthly=monthly)
        return (await budgets.set_and_wake(self.sm, user_id, budget))[0]

    async def budget(self, user_id: str) -> BudgetStatus:
        """A user's budget and spend so far this UTC day and month (``saga budget show``)."""
        return (await budgets.statuses(self.redis, self.keys, user_id))[0]

    async def budgets(self) -> list[BudgetStatus]:
        """Every user that has a budget, with their spend."""
        return await budgets.statuses(self.redis, self.keys)

    async def clear_budget(self, user_id: str) -> bool:
        """Remove a user's budget and run their budget-parked steps again; False if none."""
        return (await budgets.clear_and_wake(self.sm, user_id))[0]
