"""The Embedder port through litellm (``aembedding``), bound to one attempt like the LLM.

The runtime builds one ``LiteLLMEmbedder`` per attempt, sharing the attempt's
``CostMeter`` with its ``LiteLLMClient``::

    embedder = LiteLLMEmbedder(config, redis=r, keys=k, claim=claim,
                               api_key=billing.for_user(uid), meter=meter,
                               breaker=embedding_breaker)
    found = await embedder.embed(["glucose", "blutzucker"])

**Cache.** Vectors are cached in Redis by (model, text) for every record and user
(``Keys.embedding``, one hash tag so one MGET reads a whole request on a cluster):
a text is paid for once until its entry expires (``cache_ttl_s``), whoever asks. The
keys a record's attempts used are kept in its set ``Keys.derived`` (same lifetime), so
``saga purge`` finds the vectors derived from its texts.

**Cost.** A call that paid writes a *receipt* under the record's LLM answer keys
(``Keys.llm_cache``: record, step, epoch, attempt and the digest of the texts) and
adds it to ``meter.cache_keys``: the commit or fail script attributes each receipt's
cost exactly once, to user, record and step, exactly as it does cached answers
(``state/lua/includes/cost.lua``), so embeddings appear in ``saga show`` and
``saga costs``. A later attempt of the same step (the first one killed after paying)
finds the receipts of earlier attempts and hands them to its own finish: a call paid
by an attempt that never finished is still billed, once.

**Errors** are the LLM client's (one ``saga.adapters.provider_calls``): the user's key
per call (never ``os.environ``), 401 refetches the key once, outages count against the
shared ``embedding`` breaker (not the LLM's: an embedding outage must not park the
parser, nor an LLM outage cost the grouper its embeddings) and are retryable,
``CircuitOpenError`` while it is open. The grouper catches them all and groups offline.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import anyio.to_thread
import msgspec
import structlog

from saga.adapters.billing import KeyProvider, Secret
from saga.adapters.breaker import CircuitBreaker
from saga.adapters.budget_estimate import embedding_estimate
from saga.adapters.embedding_replies import (
    decode_vector,
    encode_vector,
    prompt_tokens,
    response_vectors,
)
from saga.adapters.llm import CostMeter
from saga.adapters.llm_replies import cost_of
from saga.adapters.provider_calls import ProviderCalls, Reserve, request
from saga.state.keys import Keys
from saga.steps.context import Embeddings
from saga.telemetry import tracing

__all__ = ["EmbeddingConfig", "LiteLLMEmbedder"]

_log = structlog.get_logger("saga.llm")
_RECEIPT_SCHEMA = 1
_RECEIPTS_LOOKED_BACK = 32
"""Attempts whose receipts a finish looks for (the cost script reads at most 64 keys)."""


@dataclass(frozen=True, slots=True)
class EmbeddingConfig:
    """Per-deployment embedding settings shared by every attempt's embedder."""

    model: str
    """litellm embedding model, e.g. ``openai/text-embedding-3-small``."""
    api_base: str | None = None
    timeout_s: float = 60.0
    cache_ttl_s: int = 90 * 86400
    """How long a vector stays reusable by any record (a name is paid once per period)."""
    receipt_ttl_s: int = 24 * 3600
    """How long a paid call's receipt waits for an attempt's finish to bill it."""
    batch: int = 256
    """Texts per provider request."""
    extra: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))


class _Receipt(msgspec.Struct, frozen=True):
    """A paid embedding call, billed once by the cost script (which sets ``by``)."""

    v: int
    model: str
    texts: int
    prompt_tokens: int
    cost: float
    by: str | None = None


def _digest(text: str, size: int = 32) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:size]


class LiteLLMEmbedder:
    """The ``Embedder`` port for one attempt of one step of one record, with the user's key."""

    def __init__(
        self,
        config: EmbeddingConfig,
        *,
        redis: Any,
        keys: Keys,
        record_id: str,
        step: str,
        epoch: int,
        attempt: int,
        api_key: KeyProvider,
        meter: CostMeter,
        breaker: CircuitBreaker | None = None,
        budget: Reserve | None = None,
    ) -> None:
        self.config = config
        self.meter = meter
        self._redis = redis
        self._keys = keys
        self._record_id, self._step = record_id, step
        self._epoch, self._attempt = epoch, attempt
        self._calls = ProviderCalls(
            "embedding", "embedding_call_failed", api_key=api_key, breaker=breaker, budget=budget
        )
        self._model_digest = _digest(config.model, 16)

    def __repr__(self) -> str:
        return f"LiteLLMEmbedder(model={self.config.model!r}, record_id={self._record_id!r})"

    @property
    def model(self) -> str:
        return self.config.model

    async def embed(self, texts: Sequence[str]) -> Embeddings:
        """Vectors for ``texts``: from the shared cache, else from the provider (metered).

        A child span ``llm embed`` records the model, texts, paid texts and cost."""
        attrs = {"gen_ai.operation.name": "embeddings", "gen_ai.request.model": self.model}
        with tracing.child_span("llm embed", attrs) as span:
            found = await self._embed(texts)
            span.set("saga.embed.texts", len(texts))
            span.set("saga.embed.paid", found.paid)
            span.set("saga.llm.cost_usd", found.cost)
            return found

    async def _embed(self, texts: Sequence[str]) -> Embeddings:
        unique = list(dict.fromkeys(texts))
        if not unique:
            return Embeddings(vectors=[], model=self.model)
        cache_keys = [self._keys.embedding(self._model_digest, _digest(t)) for t in unique]
        cached = await self._read_and_link(cache_keys)
        vectors = {
            t: decode_vector(raw) if raw else None for t, raw in zip(unique, cached, strict=True)
        }
        await self._earlier_receipts(unique)
        missing = [t for t in unique if vectors[t] is None]
        cost = 0.0
        if missing:
            fresh, cost, tokens = await self._paid(missing, unique)
            vectors.update(fresh)
            await self._remember(unique, fresh, cost, tokens)
        found = [vectors[t] or [] for t in texts]
        return Embeddings(vectors=found, model=self.model, paid=len(missing), cost=cost)

    async def _read_and_link(self, cache_keys: list[str]) -> list[Any]:
        """MGET the cached vectors and, in the same round trip, add their keys to the
        record's set of embeddings used (``Keys.derived``): the vectors derived from this
        record's texts, which ``saga purge`` deletes with it."""
        derived = self._keys.derived(self._record_id)
        pipe = self._redis.pipeline(transaction=False)
        pipe.mget(cache_keys)
        pipe.sadd(derived, *cache_keys)
        pipe.expire(derived, self.config.cache_ttl_s)
        replies = await pipe.execute()
        return list(replies[0])

    def _receipt_key(self, unique: Sequence[str], attempt: int) -> str:
        body = "\n".join(sorted(unique))
        digest = f"e{self._epoch}-emb-a{attempt}-{_digest(self.model + chr(0) + body)}"
        return self._keys.llm_cache(self._record_id, self._step, digest)

    async def _earlier_receipts(self, unique: Sequence[str]) -> None:
        """Receipts of earlier attempts at the same texts: this attempt's finish bills any
        that no finish has billed yet (an attempt killed after paying)."""
        first = max(1, self._attempt - _RECEIPTS_LOOKED_BACK)
        keys = [self._receipt_key(unique, a) for a in range(first, self._attempt)]
        if not keys:
            return
        for key, raw in zip(keys, await self._redis.mget(keys), strict=True):
            if raw is None or key in self.meter.cache_keys:
                continue
            try:
                receipt = msgspec.json.decode(raw, type=_Receipt)
            except msgspec.DecodeError:
                continue
            if not receipt.by:
                self.meter.inherited += receipt.cost
            self.meter.cache_keys.append(key)

    async def _remember(
        self, unique: Sequence[str], fresh: Mapping[str, list[float]], cost: float, tokens: int
    ) -> None:
        """The receipt first (the call is paid), then the vectors for every later record."""
        receipt = _Receipt(_RECEIPT_SCHEMA, self.model, len(fresh), tokens, cost)
        key = self._receipt_key(unique, self._attempt)
        try:
            await self._redis.set(key, msgspec.json.encode(receipt), ex=self.config.receipt_ttl_s)
            self.meter.cache_keys.append(key)
        except Exception as exc:  # paid: attribute it directly if the receipt is lost
            self.meter.unkeyed_cost += cost
            _log.warning("embedding_receipt_write_failed", error=type(exc).__name__)
        try:
            pipe = self._redis.pipeline(transaction=False)
            for text, vector in fresh.items():
                pipe.set(
                    self._keys.embedding(self._model_digest, _digest(text)),
                    encode_vector(vector),
                    ex=self.config.cache_ttl_s,
                )
            await pipe.execute()
        except Exception as exc:  # a lost cache entry costs a call later, never a result
            _log.warning("embedding_cache_write_failed", error=type(exc).__name__)

    async def _paid(
        self, missing: Sequence[str], unique: Sequence[str]
    ) -> tuple[dict[str, list[float]], float, int]:
        # The budget first (docs/budgets.md): the worst case held under this attempt's
        # receipt key, which its commit or fail passes (and so settles the hold by).
        key = await self._calls.key_to_pay(
            self._receipt_key(unique, self._attempt),
            lambda: anyio.to_thread.run_sync(embedding_estimate, self.model, list(missing)),
            self.meter.holds,
        )
        fresh: dict[str, list[float]] = {}
        cost, tokens = 0.0, 0
        for start in range(0, len(missing), self.config.batch):
            batch = list(missing[start : start + self.config.batch])
            vectors, paid, used = await self._call(key, batch)
            fresh.update(zip(batch, vectors, strict=True))
            self.meter.add(paid, used)
            cost, tokens = cost + paid, tokens + used
        _log.info("embedding_call", model=self.model, texts=len(missing), cost=cost, tokens=tokens)
        return fresh, cost, tokens

    async def _call(self, key: Secret, batch: list[str]) -> tuple[list[list[float]], float, int]:
        def read(litellm: Any, reply: Any) -> tuple[list[list[float]], float, int]:
            vectors = response_vectors(reply, len(batch))
            return vectors, cost_of(litellm, reply), prompt_tokens(reply)

        return await self._calls.call("aembedding", key, request(self.config, input=batch), read)
