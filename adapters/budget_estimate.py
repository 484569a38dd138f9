"""A model call's worst-case cost, held against the user's budget before the call
(docs/budgets.md, "Reserve, then settle"): the prompt's tokens, counted with litellm's
token counter, times the model's input price, plus the most tokens the answer may have
times its output price. Prices come from litellm's bundled model map (nothing is
downloaded); a model the map does not price costs 0 here, so a budget then holds
nothing for its calls and is kept by the spend alone, as before holds.

Blocking (litellm's counter): call these from a thread.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from saga.adapters.llm_models import loaded_litellm

__all__ = ["completion_estimate", "embedding_estimate", "prices"]


@functools.lru_cache(maxsize=32)
def prices(model: str) -> tuple[float, float]:
    """USD per input token and per output token of ``model`` (0, 0 when unknown)."""
    litellm = loaded_litellm()
    try:
        info: dict[str, Any] = dict(litellm.get_model_info(model) or {})
    except Exception:  # litellm raises for a model missing from its map
        return 0.0, 0.0
    return (
        float(info.get("input_cost_per_token") or 0.0),
        float(info.get("output_cost_per_token") or 0.0),
    )


def _prompt_tokens(model: str, messages: Sequence[dict[str, Any]]) -> int:
    litellm = loaded_litellm()
    try:
        return int(litellm.token_counter(model=model, messages=list(messages)))
    except Exception:  # an encoding litellm cannot load: three characters a token
        return sum(len(str(m.get("content", ""))) // 3 + 4 for m in messages)


def completion_estimate(
    model: str, messages: Sequence[dict[str, Any]], max_output_tokens: int
) -> float:
    """The most a chat call may cost: its prompt at the input price, plus a full answer."""
    p_in, p_out = prices(model)
    if not (p_in or p_out):
        return 0.0
    return _prompt_tokens(model, messages) * p_in + max(0, max_output_tokens) * p_out


def embedding_estimate(model: str, texts: Sequence[str]) -> float:
    """The most an embedding call may cost: its texts' tokens at the input price."""
    p_in, _ = prices(model)
    if not p_in:
        return 0.0
    litellm = loaded_litellm()
    total = 0
    for t in texts:
        try:
            total += int(litellm.token_counter(model=model, text=t))
        except Exception:
            total += len(t) // 3 + 1
    return total * p_in
