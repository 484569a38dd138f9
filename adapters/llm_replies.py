"""What a provider's reply or error means, read through litellm: a failure's class
(outage or answer, never its message: provider errors echo prompts and keys), the
completion, and what it cost."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from saga.steps.context import Completion


class Unauthorized(Exception):
    """The provider answered 401 (carries nothing from the provider's error)."""


@dataclass(frozen=True, slots=True)
class Failure:
    name: str
    status: int | None
    outage: bool
    """429, 5xx, connection error or timeout: retryable, counts against the breaker."""
    answered: bool
    """Any other provider answer (4xx): permanent."""

    def __str__(self) -> str:
        return f"{self.name} ({self.status})" if self.status else self.name


def classify(litellm: Any, exc: Exception) -> Failure:
    """Class name and status only: provider messages echo prompts and keys."""
    status = getattr(exc, "status_code", None)
    status = status if isinstance(status, int) else None
    outage_types = (
        litellm.RateLimitError,
        litellm.InternalServerError,
        litellm.ServiceUnavailableError,
        litellm.BadGatewayError,
        litellm.APIConnectionError,
        litellm.Timeout,  # a subclass of openai's APIConnectionError, not litellm's
    )
    outage = isinstance(exc, outage_types) or status in (408, 429) or (status or 0) >= 500
    answered = not outage and (isinstance(exc, litellm.APIError) or status is not None)
    return Failure(type(exc).__name__, status, outage, answered)


def completion(litellm: Any, response: Any, model: str) -> Completion:
    usage = getattr(response, "usage", None)
    choices = getattr(response, "choices", None) or []
    text = (choices[0].message.content if choices else None) or ""
    return Completion(
        text=text,
        model=getattr(response, "model", None) or model,
        cost=cost_of(litellm, response),
        prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
        completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
    )


def cost_of(litellm: Any, response: Any) -> float:
    """litellm's price table, else the cost the proxy reported, else 0 (unknown prices)."""
    try:
        cost = litellm.completion_cost(completion_response=response)
    except Exception:
        cost = None
    if not cost:
        hidden = getattr(response, "_hidden_params", None) or {}
        headers = hidden.get("additional_headers") or {}
        cost = hidden.get("response_cost") or headers.get("llm_provider-x-litellm-response-cost")
    try:
        return float(cost or 0.0)
    except (TypeError, ValueError):
        return 0.0
