"""One paid call to a model provider through litellm, the same for the LLM client and the
embedder (``saga.adapters.llm``, ``saga.adapters.embeddings``).

Before anything is paid the user's budget is checked, then the user's key is fetched,
then the breaker is asked (the key first: a billing failure must not strand the call's
breaker probe). The key goes to litellm per call, never through ``os.environ``. A 401
drops the key and retries once with a fresh one; a second 401 is permanent. 429, 5xx,
connection errors and timeouts count against the breaker and are retryable; other
answers (4xx) are permanent. Any answer that is not an outage tells the breaker the
provider is up. Errors name the exception class and status only: provider errors echo
prompts and keys.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol, TypeVar

import structlog

from saga.adapters.billing import KeyProvider, Secret
from saga.adapters.breaker import CircuitBreaker
from saga.adapters.llm_models import load_litellm
from saga.adapters.llm_replies import Unauthorized, classify
from saga.steps.errors import PermanentError, RetryableError

_log = structlog.get_logger("saga.llm")

T = TypeVar("T")

Estimate = Callable[[], Awaitable[float]]
"""A call's worst-case cost in USD, computed only when a budget needs it."""
Reserve = Callable[[str, Estimate], Awaitable[bool]]
"""``reserve(hold_id, estimate)``: hold the call's worst case against the user's budget
(True: held, its commit or fail settles it; False: no budget to hold against), or raise
BudgetExceededError (``saga.adapters.budget_gate``)."""


class Endpoint(Protocol):
    """What a deployment configures of a provider API (LLMConfig, EmbeddingConfig)."""

    @property
    def model(self) -> str: ...
    @property
    def api_base(self) -> str | None: ...
    @property
    def timeout_s(self) -> float: ...
    @property
    def extra(self) -> Mapping[str, Any]: ...


def request(endpoint: Endpoint, **payload: Any) -> dict[str, Any]:
    """litellm's keyword arguments for one call to ``endpoint`` (its extras first, so the
    model, the timeout and ``payload`` win over them); the key is added per call."""
    kwargs = {**endpoint.extra, "model": endpoint.model, "timeout": endpoint.timeout_s, **payload}
    if endpoint.api_base:
        kwargs["api_base"] = endpoint.api_base
    return kwargs


async def _free() -> float:
    return 0.0


class ProviderCalls:
    """Calls of one attempt to one provider API, with the user's key and the shared breaker.

    ``label`` names the API in error messages (``LLM``, ``embedding``), ``failed_event``
    is the log event of a failed call; ``budget`` reserves the call's worst case against
    the user's budget, or raises BudgetExceededError when it does not fit."""

    def __init__(
        self,
        label: str,
        failed_event: str,
        *,
        api_key: KeyProvider,
        breaker: CircuitBreaker | None,
        budget: Reserve | None,
    ) -> None:
        self.label, self.failed_event = label, failed_event
        self.api_key, self.breaker, self.budget = api_key, breaker, budget

    async def key_to_pay(
        self, hold_id: str = "", estimate: Estimate | None = None, held: list[str] | None = None
    ) -> Secret:
        """The budget reserved, the user's key fetched and the breaker asked, in that order.
        A hold made is named in ``held`` (its id): the attempt's commit or fail settles it."""
        held_now = self.budget is not None and await self.budget(hold_id, estimate or _free)
        if held_now and held is not None:
            held.append(hold_id)
        key = await self.api_key.get()
        if self.breaker is not None:
            await self.breaker.before_call()
        return key

    async def call(
        self,
        method: str,
        key: Secret,
        request: Mapping[str, Any],
        read: Callable[[Any, Any], T],
    ) -> T:
        """``read(litellm, reply)`` of ``litellm.<method>(**request)`` sent with ``key``,
        or with a fresh key once the provider rejects it (401)."""
        try:
            return await self._once(method, key, request, read)
        except Unauthorized:
            pass
        _log.warning("llm_key_rejected", status=401)
        await self.api_key.invalidate()
        try:
            return await self._once(method, await self.api_key.get(), request, read)
        except Unauthorized:
            pass
        raise PermanentError(f"the {self.label} provider rejected the user's key twice (401)")

    async def _once(
        self, method: str, key: Secret, request: Mapping[str, Any], read: Callable[[Any, Any], T]
    ) -> T:
        litellm = await load_litellm()
        # max_retries 0: the executor and the breaker decide about retries
        kwargs = {**request, "api_key": key.reveal(), "max_retries": 0}
        try:
            reply = await getattr(litellm, method)(**kwargs)
        except litellm.AuthenticationError:
            unauthorized = True
        except Exception as exc:
            unauthorized = False
            failure = classify(litellm, exc)
        else:
            await self._answered()
            return read(litellm, reply)
        # Outside the except blocks: nothing raised from here chains the provider's
        # exception, whose message may echo the prompt or the key.
        if unauthorized:
            await self._answered()
            raise Unauthorized
        _log.warning(
            self.failed_event,
            error=failure.name,
            status=failure.status,
            retryable=failure.outage,
        )
        if failure.outage:
            if self.breaker is not None:
                await self.breaker.record_failure()
            raise RetryableError(f"{self.label} call failed: {failure}")
        if failure.answered:
            await self._answered()
            raise PermanentError(f"{self.label} call refused: {failure}")
        raise RetryableError(f"{self.label} call failed: {failure}")

    async def _answered(self) -> None:
        # Any answer that is not an outage proves the provider is up (it closes a probe).
        if self.breaker is not None:
            await self.breaker.record_success()
