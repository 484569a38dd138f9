"""What a step sees: a context with ids, attempt, a logger, heartbeat and ports.

The runtime builds a ``StepContext`` per attempt; tests build one by hand
(see ``saga.steps.testing.make_context``). Ports are Protocols so a step can
run with a fake document source or LLM in a unit test.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

import msgspec

from saga.steps.config import StepConfig


class Document(msgspec.Struct, frozen=True):
    """A fetched document: its name, media type and raw bytes."""

    name: str
    media_type: str
    content: bytes


@runtime_checkable
class DocumentSource(Protocol):
    """Fetches a document by reference (a path, file:// or http(s):// URL).

    Raises NotFoundError for a missing document, PayloadTooLargeError over the
    byte limit, PolicyError for a document the deployment does not allow, and
    RetryableError for network errors and 5xx answers.
    """

    async def fetch(self, ref: str) -> Document: ...


class Completion(msgspec.Struct, frozen=True, kw_only=True):
    """One LLM answer with what it cost (USD) and its token counts."""

    text: str
    model: str
    cost: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached: bool = False


@dataclass(frozen=True, slots=True)
class Tokenizer:
    """The model's window and a token counter, for steps that split long inputs."""

    max_input_tokens: int
    """Tokens a request may hold (prompt and answer together for most providers)."""
    max_output_tokens: int
    """Tokens an answer may hold."""
    count: Callable[[str], int]
    """Tokens of a text in the model's encoding; synchronous and thread-safe."""


@runtime_checkable
class LLM(Protocol):
    """A chat model already bound to the saga's user (their key) and attempt (cost).

    ``purpose`` names the call inside the step (it keys the response cache).
    """

    async def complete(
        self, messages: Sequence[dict[str, Any]], *, purpose: str, json_mode: bool = True
    ) -> Completion: ...

    async def tokenizer(self) -> Tokenizer:
        """The model's limits and token counter (loading them may take a moment)."""
        ...


class Embeddings(msgspec.Struct, frozen=True, kw_only=True):
    """Vectors for texts, in the order asked, and how many came from the provider."""

    vectors: list[list[float]]
    model: str
    paid: int = 0
    """Texts the provider embedded for this call (the rest came from the cache)."""
    cost: float = 0.0
    """USD this call paid (0 when every vector was cached)."""


@runtime_checkable
class Embedder(Protocol):
    """An embedding model bound to the saga's user (their key) and attempt (cost).

    Vectors are cached by (model, text) across records: callers pass normalised texts
    so that one name is paid for once. Errors are those of ``LLM.complete``
    (``CircuitOpenError`` while its breaker is open, ``RetryableError``,
    ``PermanentError``)."""

    @property
    def model(self) -> str: ...

    async def embed(self, texts: Sequence[str]) -> Embeddings: ...


class StepContext(Protocol):
    """The per-attempt context handed to a step."""

    @property
    def record_id(self) -> str: ...
    @property
    def user_id(self) -> str: ...
    @property
    def step(self) -> str: ...
    @property
    def attempt(self) -> int: ...
    @property
    def epoch(self) -> int: ...
    @property
    def idempotency_key(self) -> str:
        """Stable for every attempt of this step in this epoch: key side effects on it."""
        ...

    @property
    def step_version(self) -> int:
        """The version of this step's code (``@app.step(version=...)``, default 1)."""
        ...

    @property
    def input_version(self) -> int:
        """The version of the step whose output is this step's input, as its commit
        recorded it (1 for the first step and for a commit that recorded none): branch
        on it to read an input an older release wrote (docs/sagas.md, step versions)."""
        ...

    @property
    def log(self) -> Any:
        """A structlog logger bound to record, user, step, attempt."""
        ...

    @property
    def documents(self) -> DocumentSource: ...
    @property
    def llm(self) -> LLM | None:
        """The user's LLM, or None when the deployment runs without one."""
        ...

    @property
    def embedder(self) -> Embedder | None:
        """The user's embedding model, or None when none is configured (grouper)."""
        ...

    @property
    def pages(self) -> list[str] | None:
        """The record's page texts, loaded with the claim for steps that ask for them."""
        ...

    def output_of(self, step: str) -> bytes:
        """The output (JSON) an earlier step committed, when this step reads it
        (``@app.step(reads=...)``); b"" otherwise."""
        ...

    def store_pages(self, pages: list[str]) -> None:
        """Stage the pages blob; it is written (with its TTL) by this step's commit."""
        ...

    @property
    def config(self) -> StepConfig:
        """Limits and choices for the business steps, from the runtime's settings."""
        ...

    def run_next_at(self, when: datetime | float) -> None:
        """Run the next step no earlier than ``when`` (aware datetime or epoch s): a
        durable timer in Redis, set by this attempt's commit."""
        ...

    def run_next_after(self, seconds: float) -> None:
        """Run the next step ``seconds`` after this attempt's commit (durable timer)."""
        ...

    async def heartbeat(self) -> None:
        """Extend the lease; long steps call it between phases."""
        ...
