"""The circuit breakers' names: apart from saga.adapters.breaker so that reading the
settings does not import Redis, anyio and structlog."""

from __future__ import annotations

LLM = "llm"
"""The LLM client's calls (router, parser)."""
EMBEDDING = "embedding"
"""The grouper's embedding calls: their own breaker, as the embedding model is often
served elsewhere (``SAGA_GROUPER_EMBEDDING_API_BASE``) and its outage must not park the
LLM's callers, nor an LLM outage stop the embeddings (docs/extraction.md)."""
BILLING = "billing"
"""The billing service's key lookups."""
NAMES = (LLM, EMBEDDING, BILLING)
