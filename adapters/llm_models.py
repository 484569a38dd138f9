"""litellm, loaded on first use, and what it knows of a model: its window and tokens.

Importing litellm costs seconds and ~160 MB, so no process pays it unless one of
its steps calls a model: ``load_litellm()`` imports it in a worker thread the first
time (the event loop keeps heartbeating meanwhile) and logs ``litellm_loaded``
once. ``model_tokenizer`` reads the model's window from litellm's bundled model
map (``get_model_info``), unless ``SAGA_LLM_MAX_INPUT_TOKENS`` overrides it, and
counts tokens with ``litellm.token_counter`` (tiktoken files bundled with litellm:
nothing is downloaded).
"""

from __future__ import annotations

import functools
import logging
import os
import threading
import time
from typing import Any

import anyio.to_thread
import structlog

from saga.steps.context import Tokenizer

__all__ = ["load_litellm", "loaded_litellm", "model_tokenizer", "quiet_litellm"]

DEFAULT_MAX_INPUT_TOKENS = 8192
"""A model litellm does not know (a local server's) is assumed this small unless
``SAGA_LLM_MAX_INPUT_TOKENS`` says otherwise."""
DEFAULT_MAX_OUTPUT_TOKENS = 4096

_log = structlog.get_logger("saga.llm")
_lock = threading.Lock()
_module: list[Any] = []  # litellm, once imported


def quiet_litellm() -> None:
    """Keep litellm off the network and from printing or logging prompts and completions."""
    # litellm fetches its price map from the network at import unless told not to.
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    litellm.suppress_debug_info = True
    if hasattr(litellm, "turn_off_message_logging"):
        litellm.turn_off_message_logging = True
    for name in ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy", "litellm", "httpx", "openai"):
        own = name.lower().startswith("litellm")  # litellm prints through its own handler
        logging.getLogger(name).setLevel(logging.CRITICAL + 1 if own else logging.WARNING)


def loaded_litellm() -> Any:
    """litellm, imported now if it was not (blocking: call it from a thread)."""
    if not _module:
        with _lock:
            if not _module:
                started = time.monotonic()
                quiet_litellm()
                import litellm

                # saga passes max_retries=0 on every call (the executor and the breaker
                # decide about retries), but litellm's OpenAI embeddings take 0 as "unset"
                # (`max_retries or DEFAULT_MAX_RETRIES`, litellm 1.110): a failed call was
                # three requests with backoff. Read at call time; 0 where it is unset.
                if isinstance(getattr(litellm, "DEFAULT_MAX_RETRIES", None), int):
                    setattr(litellm, "DEFAULT_MAX_RETRIES", 0)  # noqa: B010 (not exported)
                _module.append(litellm)
                _log.info("litellm_loaded", duration_seconds=round(time.monotonic() - started, 3))
    return _module[0]


async def load_litellm() -> Any:
    """litellm; its first import runs in a worker thread."""
    if _module:
        return _module[0]
    return await anyio.to_thread.run_sync(loaded_litellm)


@functools.lru_cache(maxsize=16)
def model_tokenizer(model: str, max_input_tokens: int = 0) -> Tokenizer:
    """The model's window (``max_input_tokens`` > 0 overrides it) and token counter.

    Blocking (it may import litellm and load an encoding): call it from a thread."""
    litellm = loaded_litellm()
    try:
        info: dict[str, Any] = dict(litellm.get_model_info(model) or {})
    except Exception:  # litellm raises for a model missing from its map
        info = {}
        if not max_input_tokens:
            _log.warning("llm_model_unknown", model=model, count=DEFAULT_MAX_INPUT_TOKENS)
    window = max_input_tokens or info.get("max_input_tokens") or info.get("max_tokens")
    answer = info.get("max_output_tokens") or DEFAULT_MAX_OUTPUT_TOKENS
    count = functools.partial(_count, litellm, model)
    count("warm up")  # the encoding loads here, in this thread, not on the event loop
    return Tokenizer(int(window or DEFAULT_MAX_INPUT_TOKENS), int(answer), count)


def _count(litellm: Any, model: str, text: str) -> int:
    try:
        return int(litellm.token_counter(model=model, text=text))
    except Exception:  # a tokenizer litellm cannot load: three characters a token
        return len(text) // 3 + 1
