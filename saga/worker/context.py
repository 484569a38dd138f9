"""The StepContext handed to a step for one attempt."""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import msgspec

from saga.state.model import Claim
from saga.steps.config import StepConfig
from saga.steps.context import LLM, Document, DocumentSource, Embedder


class SeenDocuments:
    """The attempt's document port: fetches through ``source`` and remembers every
    reference asked for and every name fetched, so that the worker can cut them out of
    the attempt's error message whatever the code that raised it wrote there."""

    def __init__(self, source: DocumentSource) -> None:
        self._source = source
        self.seen: list[str] = []

    async def fetch(self, ref: str) -> Document:
        self.seen.append(ref)
        document = await self._source.fetch(ref)
        self.seen.append(document.name)
        return document


@dataclass
class AttemptContext:
    """Implements ``saga.steps.context.StepContext`` over a claim."""

    claim: Claim
    log: Any
    documents: SeenDocuments
    llm: LLM | None
    config: StepConfig
    _heartbeat: Callable[[], Awaitable[None]]
    embedder: Embedder | None = None
    step_version: int = 1
    """The running code's version (``StepSpec.version``)."""
    staged_pages: bytes | None = field(default=None, init=False)
    run_at_ms: int = field(default=0, init=False)
    """``run_next_at``'s time (epoch ms; 0: none), sent with the commit."""
    run_after_ms: int = field(default=0, init=False)
    """``run_next_after``'s delay (ms, by the server's clock at the commit; 0: none)."""
    _pages: list[str] | None = field(default=None, init=False)

    @property
    def references(self) -> list[str]:
        """Document references and names this attempt has handled (never to be shown)."""
        return self.documents.seen

    @property
    def record_id(self) -> str:
        return self.claim.record_id

    @property
    def user_id(self) -> str:
        return self.claim.user_id

    @property
    def step(self) -> str:
        return self.claim.step

    @property
    def attempt(self) -> int:
        return self.claim.attempt

    @property
    def epoch(self) -> int:
        return self.claim.epoch

    @property
    def idempotency_key(self) -> str:
        return self.claim.idempotency_key

    @property
    def input_version(self) -> int:
        """The ``sv:<step before>`` the claim read (asked for only in a pipeline with a
        versioned step, ``Pipeline.versioned``); absent: 1."""
        for name, value in self.claim.extra.items():
            if name.startswith("sv:") and value:
                return int(value)
        return 1

    @property
    def previous_output(self) -> bytes:
        """What this step committed in an earlier epoch (a retry of an earlier step re-runs
        it), when its spec asks for it (``StepSpec.previous_output``); b"" otherwise."""
        return self.claim.extra.get(f"out:{self.claim.step}", b"")

    def output_of(self, step: str) -> bytes:
        """The output an earlier step committed, when this step's spec reads it
        (``StepSpec.reads``); b"" otherwise."""
        return self.claim.extra.get(f"out:{step}", b"")

    @property
    def pages(self) -> list[str] | None:
        if self._pages is None and self.claim.pages is not None:
            self._pages = msgspec.json.decode(self.claim.pages, type=list[str])
        return self._pages

    def store_pages(self, pages: list[str]) -> None:
        self.staged_pages = msgspec.json.encode(pages)

    def run_next_at(self, when: datetime | float) -> None:
        """Run the next step no earlier than ``when`` (an aware datetime, or epoch
        seconds): the commit parks the saga as a durable timer in Redis, no worker held.
        A time already past runs it at once; the last call wins."""
        if isinstance(when, datetime):
            if when.tzinfo is None:
                raise ValueError(
                    "run_next_at needs an aware datetime (tzinfo=UTC), not a naive one"
                )
            when = when.timestamp()
        if not (isinstance(when, int | float) and math.isfinite(when)):
            raise ValueError(f"run_next_at takes a datetime or epoch seconds, not {when!r}")
        self.run_at_ms, self.run_after_ms = max(int(when * 1000), 0), 0

    def run_next_after(self, seconds: float) -> None:
        """Run the next step ``seconds`` after this step's commit (by the server's
        clock): a durable timer, as ``run_next_at``."""
        if not (isinstance(seconds, int | float) and math.isfinite(seconds) and seconds >= 0):
            raise ValueError(f"run_next_after takes seconds >= 0, not {seconds!r}")
        self.run_at_ms, self.run_after_ms = 0, int(seconds * 1000)

    async def heartbeat(self) -> None:
        await self._heartbeat()
