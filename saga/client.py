"""The async client an API backend uses to submit and steer sagas.

It runs the same scripts as the CLI and the executors::

    async with SagaClient.from_settings(load_settings()) as sagas:
        await sagas.start("mr-2024-0001", "user-42", document="s3-proxy://...")
        saga = await sagas.get("mr-2024-0001")
        events = await sagas.history("mr-2024-0001")
        await sagas.retry("mr-2024-0001", step="parser")
        await sagas.cancel("mr-2024-0001")
        await sagas.accept_review("mr-2024-0001")   # a person checked the flagged results
"""

from __future__ import annotations

from types import TracebackType
from typing import Any

import msgspec

from saga.pipeline import Pipeline
from saga.settings import Settings
from saga.state import operator, partitions, reads, streams
from saga.state.keys import Keys
from saga.state.machine import StateMachine
from saga.state.model import HistoryEvent, Saga
from saga.state.operator import RetryResult
from saga.state.requests import StartResult

__all__ = ["SagaClient"]


class _FirstInput(msgspec.Struct, frozen=True):
    document: str = ""


class SagaClient:
    """start / get / history / retry / cancel over one keyspace."""

    def __init__(
        self, client: Any, keys: Keys, pipeline: Pipeline, settings: Settings | None = None
    ) -> None:
        self.redis = client
        self.keys = keys
        self.pipeline = pipeline
        self.sm = StateMachine(client, keys, settings.limits if settings else None)
        self._owns_client = False
        self._groups_ready = False

    @classmethod
    def from_settings(cls, settings: Settings, pipeline: Pipeline | None = None) -> SagaClient:
        from saga.runtime import document_pipeline, keys_of, open_client

        self = cls(
            open_client(settings),
            keys_of(settings),
            pipeline or document_pipeline(settings),
            settings,
        )
        self._owns_client = True
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
        self, record_id: str, user_id: str, *, document: str = "", trace: str = ""
    ) -> StartResult:
        """Create the saga and enqueue its first step; the same call again is a no-op.

        ``trace`` is a W3C traceparent to run the saga's steps under; by default
        the saga gets its own trace (a ``saga <record_id>`` span, under the
        caller's current span if there is one) when tracing is on."""
        from saga.telemetry import tracing  # imports OpenTelemetry only when tracing is on

        if not self._groups_ready:  # once per client: groups must exist at ID 0 first
            await partitions.guard(self.redis, self.keys)
            await streams.ensure_groups(self.redis, self.keys, self.pipeline.names)
            self._groups_ready = True
        first = msgspec.json.encode(_FirstInput(document=document))
        step = self.pipeline.first.name
        ready = self.keys.ready(self.keys.partition_of(record_id), step)
        with tracing.saga_span(record_id, user_id, ready) if not trace else tracing.NO_SPAN as span:
            result = await self.sm.start(
                record_id,
                user_id,
                step,
                input_json=first,
                document=document,
                trace=trace or tracing.traceparent_of(span),
            )
            span.set("saga.created", result.created)
        return result

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
            step = (await self.get(record_id)).step
        spec = self.pipeline.get(step)
        while spec.loads_pages and self.pipeline.prev_of(step) != "_input":
            if await self.redis.exists(self.keys.pages(record_id)):
                break
            step = self.pipeline.prev_of(step)
            spec = self.pipeline.get(step)
        return await operator.retry(
            self.sm,
            record_id,
            step,
            self.pipeline.prev_of(step),
            force=force,
            actor=actor,
            steps=self.pipeline.names,
        )

    async def accept_review(self, record_id: str, *, actor: str = "api") -> int:
        """A person checked the results a step flagged and accepts them: the flags are
        cleared (the saga leaves ``saga list --review``) and who did it is in history."""
        return await operator.accept_review(self.sm, record_id, self.pipeline.names, actor=actor)

    async def cancel(self, record_id: str, *, actor: str = "api") -> str:
        return await operator.cancel(self.sm, record_id, actor=actor)
