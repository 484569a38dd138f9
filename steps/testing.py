"""Hand-built contexts and fake ports so a step runs in a unit test, no runtime needed.

ctx = make_context(documents=MemoryDocuments({"a.txt": Document(...)}))
out = await route(ctx, RouterInput(document="a.txt"))
assert ctx.stored_pages[-1] == [...]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import structlog

from saga.steps.config import StepConfig
from saga.steps.context import (
    LLM,
    Completion,
    Document,
    DocumentSource,
    Embedder,
    Embeddings,
    StepContext,
    Tokenizer,
)
from saga.steps.errors import NotFoundError


class MemoryDocuments:
    """A DocumentSource over a dict of reference -> Document; NotFoundError otherwise."""

    def __init__(self, documents: Mapping[str, Document] | None = None) -> None:
        self.documents = dict(documents or {})
        self.fetched: list[str] = []

    async def fetch(self, ref: str) -> Document:
        self.fetched.append(ref)
        try:
            return self.documents[ref]
        except KeyError:
            raise NotFoundError(f"no document at {ref}") from None


@dataclass
class ScriptedLLM:
    """An LLM port answering from a script, one reply per call, recording every call.

    A reply that is an exception instance is raised instead of returned. Its
    tokenizer counts a token per four characters in a window of ``max_input_tokens``.
    """

    replies: list[str | Exception]
    model: str = "scripted"
    calls: list[tuple[str, list[dict[str, str]]]] = field(default_factory=list)
    max_input_tokens: int = 128_000
    max_output_tokens: int = 16_384

    async def complete(
        self, messages: Sequence[dict[str, Any]], *, purpose: str, json_mode: bool = True
    ) -> Completion:
        self.calls.append((purpose, [dict(m) for m in messages]))
        if not self.replies:
            raise AssertionError(f"ScriptedLLM has no reply left for purpose {purpose!r}")
        reply = self.replies.pop(0)
        if isinstance(reply, Exception):
            raise reply
        return Completion(text=reply, model=self.model)

    async def tokenizer(self) -> Tokenizer:
        return Tokenizer(self.max_input_tokens, self.max_output_tokens, _four_chars_a_token)


def _four_chars_a_token(text: str) -> int:
    return len(text) // 4 + 1


NGRAM_DIMENSIONS = 256


def ngram_vector(text: str, dimensions: int = NGRAM_DIMENSIONS) -> list[float]:
    """A deterministic stand-in for an embedding: character trigrams of each word
    (padded), hashed with blake2b into ``dimensions`` signed buckets. Texts that share
    spelling are near; it knows nothing of meaning (no synonym, no translation)."""
    import hashlib

    vector = [0.0] * dimensions
    for word in text.lower().split():
        padded = f" {word} "
        for i in range(len(padded) - 2):
            digest = hashlib.blake2b(padded[i : i + 3].encode(), digest_size=4).digest()
            bucket = int.from_bytes(digest[:3], "little") % dimensions
            vector[bucket] += 1.0 if digest[3] & 1 else -1.0
    return vector


@dataclass
class NgramEmbedder:
    """An Embedder port over ``ngram_vector``, recording every call; a reply that is an
    exception instance (``failures``, in order) is raised instead."""

    model: str = "ngram-stand-in"
    calls: list[list[str]] = field(default_factory=list)
    failures: list[Exception] = field(default_factory=list)

    async def embed(self, texts: Sequence[str]) -> Embeddings:
        self.calls.append(list(texts))
        if self.failures:
            raise self.failures.pop(0)
        vectors = [ngram_vector(t) for t in texts]
        return Embeddings(vectors=vectors, model=self.model, paid=len(texts))


@dataclass
class ManualContext:
    """A StepContext built by hand; ``stored_pages`` and ``heartbeats`` record effects."""

    record_id: str = "rec-1"
    user_id: str = "user-1"
    step: str = "router"
    attempt: int = 1
    epoch: int = 1
    idempotency_key: str = ""
    step_version: int = 1
    input_version: int = 1
    """Set it to test a step's branch for an input an older version wrote."""
    log: Any = None
    documents: DocumentSource = field(default_factory=MemoryDocuments)
    llm: LLM | None = None
    pages: list[str] | None = None
    config: StepConfig = field(default_factory=StepConfig)
    embedder: Embedder | None = None
    stored_pages: list[list[str]] = field(default_factory=list)
    heartbeats: int = 0
    run_next: list[tuple[str, float]] = field(default_factory=list)
    """``run_next_at`` / ``run_next_after`` calls: ("at", epoch s) or ("after", s)."""
    outputs: dict[str, bytes] = field(default_factory=dict)
    """Earlier steps' outputs (JSON) for ``output_of``."""

    def __post_init__(self) -> None:
        if not self.idempotency_key:
            self.idempotency_key = f"{self.record_id}:{self.step}:{self.epoch}"
        if self.log is None:
            self.log = structlog.get_logger("saga.steps").bind(
                record_id=self.record_id, user_id=self.user_id, step=self.step, attempt=self.attempt
            )

    def output_of(self, step: str) -> bytes:
        return self.outputs.get(step, b"")

    def store_pages(self, pages: list[str]) -> None:
        self.stored_pages.append(list(pages))

    async def heartbeat(self) -> None:
        self.heartbeats += 1

    def run_next_at(self, when: datetime | float) -> None:
        self.run_next.append(("at", when.timestamp() if isinstance(when, datetime) else when))

    def run_next_after(self, seconds: float) -> None:
        self.run_next.append(("after", seconds))


def make_context(
    *,
    step: str = "router",
    record_id: str = "rec-1",
    user_id: str = "user-1",
    attempt: int = 1,
    epoch: int = 1,
    documents: DocumentSource | None = None,
    llm: LLM | None = None,
    pages: list[str] | None = None,
    config: StepConfig | None = None,
    log: Any = None,
    embedder: Embedder | None = None,
) -> ManualContext:
    """A context for one step attempt; every port defaults to an empty fake."""
    return ManualContext(
        record_id=record_id,
        user_id=user_id,
        step=step,
        attempt=attempt,
        epoch=epoch,
        log=log,
        documents=documents if documents is not None else MemoryDocuments(),
        llm=llm,
        pages=pages,
        config=config if config is not None else StepConfig(),
        embedder=embedder,
    )


def as_step_context(ctx: ManualContext) -> StepContext:
    """``ctx`` typed as the Protocol (this function is where mypy checks that it conforms)."""
    return ctx
