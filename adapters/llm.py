"""The LLM port through litellm, bound to one attempt: the user's key, a cost meter, a cache.

The runtime builds one ``LiteLLMClient`` per attempt::

    meter = CostMeter()
    llm = LiteLLMClient(config, redis=r, keys=k, record_id=rid, step="parser",
                        api_key=billing.for_user(uid), meter=meter, breaker=llm_breaker)
    ...                      # the step runs and calls llm.complete(...)
    meter.total              # USD this attempt paid; recorded by its commit or fail

The user's key goes to ``litellm.acompletion(api_key=...)`` per call, never
through ``os.environ``, so concurrent steps for different users are safe.
Answers are cached in Redis per record, step, epoch and prompt digest: a step
re-run after a crash gets the answer it already paid for at cost 0
(``cached=True``), while an operator's retry (a new epoch) asks the model again.

Errors (``saga.adapters.provider_calls``, shared with the embedder): 401 drops the
cached key and retries once with a fresh one, a second 401 is permanent; 429, 5xx,
connection errors and timeouts count against the breaker and are retryable; other 4xx
are permanent. Messages are built from the exception class and status only, because
provider errors echo prompts. litellm is imported on first use, in a thread
(``saga.adapters.llm_models``).
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
from saga.adapters.llm_models import load_litellm, model_tokenizer
from saga.adapters.llm_replies import completion
from saga.adapters.provider_calls import ProviderCalls, Reserve, request
from saga.state.keys import Keys
from saga.steps.context import Completion, Tokenizer
from saga.telemetry import tracing

__all__ = ["CostMeter", "LLMConfig", "LiteLLMClient"]

_log = structlog.get_logger("saga.llm")
_CACHE_SCHEMA = 1


@dataclass(slots=True)
class CostMeter:
    """What one attempt paid: every provider call adds to it, cache hits add nothing."""

    total: float = 0.0
    """USD, from litellm's price table or the proxy's reported cost."""
    calls: int = 0
    """Provider calls made (and paid for) by this attempt."""
    cached_calls: int = 0
    """Answers reused from the response cache, at no cost."""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cache_keys: list[str] = field(default_factory=list)
    """Cached answers used (paid now or earlier): the commit attributes each one's cost once."""
    unkeyed_cost: float = 0.0
    """Cost of paid calls whose answer could not be cached (attributed directly)."""
    inherited: float = 0.0
    """Cost of cached answers no attempt has billed yet (one killed after paying):
    this attempt's commit or fail bills them, so its metrics count them."""
    holds: list[str] = field(default_factory=list)
    """Budget holds this attempt made (each call's cache key): its commit or fail releases
    them, with the real cost of the calls that were paid."""

    def settle_keys(self) -> list[str]:
        """The keys the commit or fail is given: answers used, then holds of calls that
        left no answer (a provider error); a key appears once."""
        if not self.holds:
            return list(self.cache_keys)
        return list(dict.fromkeys([*self.cache_keys, *self.holds]))

    @property
    def billed(self) -> float:
        """USD this attempt's commit or fail attributes: what it paid and what it inherited."""
        return self.total + self.inherited

    def add(self, cost: float, prompt_tokens: int = 0, completion_tokens: int = 0) -> None:
        self.total += cost
        self.calls += 1
        self.prompt_tokens += prompt_tokens
        self.completion_tokens += completion_tokens


@dataclass(frozen=True, slots=True)
class LLMConfig:
    """Per-deployment LLM settings shared by every attempt's client."""

    model: str
    """litellm model name, e.g. ``openai/gpt-4o-mini``."""
    api_base: str | None = None
    """The provider or LiteLLM proxy base URL; None for the provider's default."""
    timeout_s: float = 60.0
    """Per call; a timeout is retryable and counts against the breaker."""
    cache_ttl_s: int = 24 * 3600
    """How long an answer stays reusable by a re-run of the same step."""
    extra: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    """More ``acompletion`` kwargs, e.g. ``{"mock_response": "{}"}`` offline."""
    max_input_tokens: int = 0
    """The model's window in tokens; 0 takes it from litellm's model map."""
    max_tokens: int = 0
    """Most tokens an answer may have (sent as ``max_tokens``); 0 sends none. A budget
    holds this many output tokens per call (the model's most when 0)."""


class _Cached(msgspec.Struct, frozen=True):
    v: int
    text: str
    model: str
    prompt_tokens: int
    completion_tokens: int
    cost: float = 0.0
    """What the answer cost when it was paid; attributed once by a commit or fail."""
    by: str | None = None
    """The fencing token of the attempt that attributed the cost (set by the scripts)."""


class LiteLLMClient:
    """The ``LLM`` port for one attempt of one step of one record, with the user's key."""

    def __init__(
        self,
        config: LLMConfig,
        *,
        redis: Any,
        keys: Keys,
        record_id: str,
        step: str,
        api_key: KeyProvider,
        meter: CostMeter,
        breaker: CircuitBreaker | None = None,
        epoch: int = 1,
        budget: Reserve | None = None,
    ) -> None:
        self.config = config
        self.meter = meter
        self._redis = redis
        self._keys = keys
        self._record_id = record_id
        self._step = step
        self._epoch = epoch
        self._calls = ProviderCalls(
            "LLM", "llm_call_failed", api_key=api_key, breaker=breaker, budget=budget
        )

    def __repr__(self) -> str:
        return f"LiteLLMClient(model={self.config.model!r}, record_id={self._record_id!r})"

    async def tokenizer(self) -> Tokenizer:
        """The model's window and token counter (litellm loads in a thread on first use)."""
        await load_litellm()
        return await anyio.to_thread.run_sync(
            model_tokenizer, self.config.model, self.config.max_input_tokens
        )

    async def complete(
        self, messages: Sequence[dict[str, Any]], *, purpose: str, json_mode: bool = True
    ) -> Completion:
        """One answer: from the response cache, else from the provider (metered).

        A child span ``llm <purpose>`` of the attempt records the model, tokens,
        cost and whether the answer was cached; never the messages or the answer."""
        attrs = {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": self.config.model,
            "saga.llm.purpose": purpose,
        }
        with tracing.child_span(f"llm {purpose}", attrs) as span:
            completion = await self._complete(messages, purpose=purpose, json_mode=json_mode)
            span.set("gen_ai.response.model", completion.model)
            span.set("gen_ai.usage.input_tokens", completion.prompt_tokens)
            span.set("gen_ai.usage.output_tokens", completion.completion_tokens)
            span.set("saga.llm.cost_usd", completion.cost)
            span.set("saga.llm.cached", completion.cached)
            return completion

    async def _complete(
        self, messages: Sequence[dict[str, Any]], *, purpose: str, json_mode: bool
    ) -> Completion:
        cache_key = self._keys.llm_cache(
            self._record_id, self._step, self._digest(messages, purpose, json_mode)
        )
        hit = await self._redis.get(cache_key)
        if hit is not None:
            cached = msgspec.json.decode(hit, type=_Cached)
            if not cached.by and cache_key not in self.meter.cache_keys:
                self.meter.inherited += cached.cost  # paid by an attempt that never finished
            self.meter.cached_calls += 1
            self.meter.cache_keys.append(cache_key)
            _log.debug("llm_cache_hit", purpose=purpose, model=cached.model)
            sealer = self._keys.sealer
            return Completion(
                text=sealer.unseal_text(cached.text) if sealer else cached.text,
                model=cached.model,
                prompt_tokens=cached.prompt_tokens,
                completion_tokens=cached.completion_tokens,
                cached=True,
            )
        # The budget before anything is paid (the call's worst case held, or the saga
        # parked when it does not fit), then the key.
        key = await self._calls.key_to_pay(
            cache_key, lambda: self._estimate(messages), self.meter.holds
        )
        completion = await self._call(key, messages, json_mode)
        self.meter.add(completion.cost, completion.prompt_tokens, completion.completion_tokens)
        sealer = self._keys.sealer  # the answer may quote the pages: sealed like them
        record = _Cached(
            _CACHE_SCHEMA,
            sealer.seal_text(completion.text) if sealer else completion.text,
            completion.model,
            completion.prompt_tokens,
            completion.completion_tokens,
            completion.cost,
        )
        try:
            await self._redis.set(
                cache_key, msgspec.json.encode(record), ex=self.config.cache_ttl_s
            )
            self.meter.cache_keys.append(cache_key)
        except Exception as exc:  # the answer is paid: attribute it even if uncached
            self.meter.unkeyed_cost += completion.cost
            _log.warning("llm_cache_write_failed", error=type(exc).__name__)
        _log.info(
            "llm_call",
            purpose=purpose,
            model=completion.model,
            cost=completion.cost,
            prompt_tokens=completion.prompt_tokens,
            completion_tokens=completion.completion_tokens,
        )
        return completion

    async def _estimate(self, messages: Sequence[dict[str, Any]]) -> float:
        """The call's worst case: prompt tokens x input price + max answer x output price."""
        from saga.adapters.budget_estimate import completion_estimate

        tokenizer = await self.tokenizer()
        answer = self.config.max_tokens or tokenizer.max_output_tokens
        return await anyio.to_thread.run_sync(
            completion_estimate, self.config.model, list(messages), answer
        )

    def _digest(self, messages: Sequence[dict[str, Any]], purpose: str, json_mode: bool) -> str:
        """The epoch, then what the answer depends on: a retry's new epoch asks again."""
        body = msgspec.json.encode(
            [self.config.model, purpose, json_mode, list(messages)], order="sorted"
        )
        return f"e{self._epoch}-{hashlib.sha256(body).hexdigest()}"

    async def _call(
        self, key: Secret, messages: Sequence[dict[str, Any]], json_mode: bool
    ) -> Completion:
        payload: dict[str, Any] = {"messages": list(messages)}
        if self.config.max_tokens:
            payload["max_tokens"] = self.config.max_tokens
        if json_mode:
            payload["response_format"] = {"type": "json_object"}
        model = self.config.model
        return await self._calls.call(
            "acompletion",
            key,
            request(self.config, **payload),
            lambda litellm, reply: completion(litellm, reply, model),
        )
