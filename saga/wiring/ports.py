"""The default ports: documents over file/http, the user's LLM and embedding model through
litellm with per-user keys from billing (or one static key), each dependency behind its
own shared circuit breaker (``llm``, ``embedding``, ``billing``)."""

from __future__ import annotations

import functools
from typing import Any

import structlog

from saga.adapters.billing import BillingClient, KeyProvider, Secret, StaticKey
from saga.adapters.breaker import BILLING, EMBEDDING, LLM, BreakerPolicy, CircuitBreaker
from saga.adapters.documents import DocumentFetcher
from saga.config.settings import Settings
from saga.state.keys import Keys
from saga.state.model import Claim
from saga.steps.context import DocumentSource, Embedder
from saga.worker.ports import AttemptPorts


class DefaultPorts:
    def __init__(self, settings: Settings, client: Any, keys: Keys) -> None:
        from saga.adapters.llm import LLMConfig

        self.settings, self.client, self.keys = settings, client, keys
        b = settings.breaker
        policy = BreakerPolicy(failures=b.failures, window_s=b.window_s, cooldown_s=b.cooldown_s)
        self.llm_breaker = CircuitBreaker(client, keys, LLM, policy)
        # Always its own breaker, even on the LLM's provider: a gateway can lose one model
        # and serve the other, and the grouper without embeddings still groups offline.
        self.embedding_breaker = CircuitBreaker(client, keys, EMBEDDING, policy)
        self._documents = DocumentFetcher(
            max_bytes=settings.step_config.max_document_bytes, policy=settings.document_policy
        )
        self.billing: BillingClient | None = None
        if settings.billing_url:
            breaker = CircuitBreaker(client, keys, BILLING, policy)
            self.billing = BillingClient(settings.billing_url, client, keys, breaker)
        extra = {"mock_response": settings.llm_mock_response} if settings.llm_mock_response else {}
        self.llm_config = LLMConfig(
            model=settings.llm_model,
            api_base=settings.llm_api_base or None,
            timeout_s=settings.llm_timeout_s,
            extra=extra,
            max_input_tokens=settings.llm_max_input_tokens,
            max_tokens=settings.llm_max_tokens,
        )
        from saga.adapters.budget_gate import BudgetGate

        self.budget_gate = BudgetGate(
            client, keys, refresh_s=settings.budget_refresh_s, cluster=settings.cluster
        )
        self.llm_enabled = bool(
            settings.billing_url or settings.llm_api_key or settings.llm_mock_response
        )
        # Embeddings need a real key (litellm's mock_response does not cover them).
        model = settings.step_config.embedding_model
        self.embedding_enabled = bool(model and (settings.billing_url or settings.llm_api_key))
        self.embedding_config = None
        if model and not self.embedding_enabled:
            structlog.get_logger("saga.llm").warning(
                "embedding_model_without_key",
                model=model,
                hint="set SAGA_BILLING_URL or SAGA_LLM_API_KEY; the grouper groups offline",
            )
        if self.embedding_enabled:
            from saga.adapters.embeddings import EmbeddingConfig

            api_base = settings.grouper_embedding_api_base or settings.llm_api_base
            self.embedding_config = EmbeddingConfig(
                model=model, api_base=api_base or None, timeout_s=settings.llm_timeout_s
            )

    def warm_up(self) -> tuple[str, ...]:
        """Import litellm and load the model's token counter, when a model is
        configured (blocking: saga.worker.warmup runs it in a thread before ready)."""
        if not (self.llm_enabled or self.embedding_enabled):
            return ()
        from saga.adapters.llm_models import loaded_litellm, model_tokenizer

        loaded_litellm()
        if self.llm_enabled:
            model_tokenizer(self.llm_config.model, self.llm_config.max_input_tokens)
        return ("litellm",)

    @property
    def documents(self) -> DocumentSource:
        return self._documents

    def _key(self, user_id: str) -> KeyProvider:
        if self.billing is not None:
            return self.billing.for_user(user_id)
        return StaticKey(Secret(self.settings.llm_api_key or "sk-no-key"))

    def for_attempt(self, claim: Claim) -> AttemptPorts:
        if not (self.llm_enabled or self.embedding_enabled):
            return AttemptPorts(None, lambda: (0.0, 0))
        from saga.adapters.llm import CostMeter, LiteLLMClient

        meter = CostMeter()
        key = self._key(claim.user_id)
        llm = None
        if self.llm_enabled:
            llm = LiteLLMClient(
                self.llm_config,
                redis=self.client,
                keys=self.keys,
                record_id=claim.record_id,
                step=claim.step,
                api_key=key,
                meter=meter,
                breaker=self.llm_breaker,
                epoch=claim.epoch,
                budget=functools.partial(self.budget_gate.reserve, claim),
            )
        return AttemptPorts(
            llm,
            lambda: (meter.unkeyed_cost, meter.prompt_tokens + meter.completion_tokens),
            meter.settle_keys,
            lambda: meter.billed,
            embedder=self._embedder(claim, key, meter),
        )

    def _embedder(self, claim: Claim, key: KeyProvider, meter: Any) -> Embedder | None:
        """The user's embedding model on the attempt's meter, behind the ``embedding`` breaker."""
        if self.embedding_config is None:
            return None
        from saga.adapters.embeddings import LiteLLMEmbedder

        return LiteLLMEmbedder(
            self.embedding_config,
            redis=self.client,
            keys=self.keys,
            record_id=claim.record_id,
            step=claim.step,
            epoch=claim.epoch,
            attempt=claim.attempt,
            api_key=key,
            meter=meter,
            breaker=self.embedding_breaker,
            budget=functools.partial(self.budget_gate.reserve, claim),
        )

    async def aclose(self) -> None:
        await self._documents.aclose()
        if self.billing is not None:
            await self.billing.aclose()
