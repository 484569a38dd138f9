"""What the executor needs from the outside world, per process and per attempt."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from saga.state.model import Claim
from saga.steps.context import LLM, DocumentSource, Embedder


@dataclass(frozen=True, slots=True)
class AttemptPorts:
    """Ports bound to one attempt: the user's LLM, and how to read what it cost."""

    llm: LLM | None
    cost: Callable[[], tuple[float, int]]
    """(USD not covered by cached answers, tokens) of this attempt so far."""
    cost_keys: Callable[[], list[str]] = list
    """Keys of the cached LLM answers this attempt used (each one's cost is attributed once)."""
    paid: Callable[[], float] = float
    """USD this attempt's commit or fail bills: the calls it paid, and cached answers
    paid by an attempt that never finished (logs and metrics)."""
    embedder: Embedder | None = None
    """The user's embedding model (the grouper's), metered like ``llm``."""


class Ports(Protocol):
    @property
    def documents(self) -> DocumentSource: ...

    def for_attempt(self, claim: Claim) -> AttemptPorts: ...

    async def aclose(self) -> None: ...


class NoDocuments:
    """A document source for deployments whose steps fetch nothing."""

    async def fetch(self, ref: str) -> object:
        from saga.steps.errors import InvalidInputError

        raise InvalidInputError("this worker has no document source configured")


class NullPorts:
    """No documents, no LLM: for no-op pipelines (benchmarks, engine tests)."""

    documents: DocumentSource = NoDocuments()  # type: ignore[assignment]

    def for_attempt(self, claim: Claim) -> AttemptPorts:
        return AttemptPorts(None, lambda: (0.0, 0))

    async def aclose(self) -> None:
        return None
