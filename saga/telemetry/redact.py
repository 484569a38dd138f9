"""What may reach a log line: an allow-list of fields, secrets masked, text withheld.

Every structlog event (and every stdlib record routed through structlog) passes
through ``redact``:

* fields on ``ALLOWED`` pass; the free-text ones among them (``error``,
  ``detail``, ``reason``, ``event``...) are scrubbed of anything that looks like
  a key and truncated;
* any other field keeps a number, a boolean or a short harmless string; a name
  that says content or secret (``prompt``, ``page``, ``api_key``...), a string
  that looks like a key, long text or a container is replaced by a marker;
* an exception (``exc_info``) becomes a short ``exception`` string: its type,
  its safe message (``exception_text``) and where it was raised, never locals.

``exception_text`` is also what the runtime stores in history: the message of a
saga error (whose messages are written not to hold content, see
``saga.steps.errors``) scrubbed and truncated; the message of any other
exception is withheld, because a library's error can echo a page or a prompt.
"""

from __future__ import annotations

import functools
import os
import re
import sys
import traceback
from collections.abc import MutableMapping
from typing import Any

from saga.state.errors import SagaError

ALLOWED = frozenset(
    {
        # identity of the work
        *("record_id", "user_id", "step", "attempt", "epoch", "worker", "trace_id", "span_id"),
        *("entry", "partition", "steps", "next_step", "state", "idempotency_key"),
        # structlog's own
        *("event", "level", "timestamp", "logger", "logger_name", "exception"),
        # lifecycle numbers and outcomes
        *("duration_seconds", "lease_until_ms", "delay_ms", "cost_usd", "cost", "duplicate"),
        *("action", "count", "inflight", "left_unacknowledged", "batch", "port", "created"),
        # errors (the free-text ones are scrubbed)
        *("error", "error_class", "detail", "reason", "status", "retryable", "hint"),
        # LLM, billing and breakers (never content)
        *("purpose", "model", "prompt_tokens", "completion_tokens", "cached", "breaker"),
        *("failures", "probe_failed", "retry_at", "exporter"),
    }
)
"""Fields that pass as they are (strings in FREE_TEXT are scrubbed)."""

FREE_TEXT = frozenset({"event", "error", "detail", "reason", "exception", "hint"})
"""Allowed fields whose strings can carry text from outside: scrubbed and truncated."""

_PASSING = ALLOWED - FREE_TEXT
"""Fields that pass untouched (the test per field is the whole cost of most lines)."""

TEXT_LIMIT = 300
"""Characters kept of a free-text field."""

UNKNOWN_LIMIT = 64
"""Longest string kept in a field that is not on the allow-list."""

_CONTENT_NAME = re.compile(
    r"prompt|completion|content|message|page|text|body|document_text|api_?key|secret|password"
    r"|passwd|authorization|credential|cookie|token|bearer",
    re.IGNORECASE,
)
_SECRETS = [
    re.compile(r"\bsk-[A-Za-z0-9_\-]{4,}"),  # OpenAI, Anthropic, LiteLLM virtual keys
    re.compile(r"\bBearer\s+[A-Za-z0-9._~+/=\-]{4,}", re.IGNORECASE),
    re.compile(r"\bBasic\s+[A-Za-z0-9+/=]{8,}"),
    re.compile(r"\beyJ[A-Za-z0-9_\-]{6,}\.[A-Za-z0-9_\-]{6,}\.[A-Za-z0-9_\-]*"),  # JWT
    re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),  # AWS access key ids
    re.compile(r"\b(?:ghp|gho|ghs|xox[abp])[-_][A-Za-z0-9\-]{10,}"),
    re.compile(
        r"(?i)\b(api[_-]?key|x-api-key|authorization|password|passwd|secret|token)"
        r"(\W{1,3})[^\s\"',;&]{4,}"
    ),
    re.compile(r"(?<=://)[^/\s:@]+:[^/\s@]+(?=@)"),  # user:password@ in URLs
    re.compile(r"\b[A-Za-z0-9+/_\-]{40,}={0,2}"),  # long opaque tokens
]
MASK = "***"


def scrub_text(text: str, limit: int = TEXT_LIMIT, *, opaque: bool = True) -> str:
    """``text`` with every key-like substring masked, cut to ``limit`` characters.
    ``opaque=False`` keeps long runs without a key's prefix (a path, in a sealed detail)."""
    for pattern in _SECRETS if opaque else _SECRETS[:-1]:
        if pattern.groups == 2:
            text = pattern.sub(lambda m: f"{m.group(1)}{m.group(2)}{MASK}", text)
        else:
            text = pattern.sub(MASK, text)
    if len(text) > limit:
        text = f"{text[:limit]}...(+{len(text) - limit} chars)"
    return text


@functools.lru_cache(maxsize=1024)
def _scrub_short(text: str) -> str:
    # Short texts (event names above all) repeat: scrub each once (8 regexes, ~5 µs).
    return scrub_text(text)


def looks_secret(text: str) -> bool:
    return any(p.search(text) for p in _SECRETS)


def exception_text(exc: BaseException, limit: int = 500) -> str:
    """What may be stored and logged of an exception's message (see the module doc)."""
    name = type(exc).__name__
    if isinstance(exc, SagaError):
        return scrub_text(str(exc), limit) or name
    where = raised_at(exc)
    return f"{name} (message withheld: not a saga error){' at ' + where if where else ''}"


def safe_error(exc: BaseException, message: str) -> str:
    """A retry decision's ``message`` with the exception's own text made safe.

    ``decide`` builds ``str(exc)[:500]`` (or the class name) plus an optional
    suffix such as "(gave up after 5 attempts)"; the suffix is kept.
    """
    raw = str(exc)[:500] or type(exc).__name__
    tail = message[len(raw) :] if message.startswith(raw) else ""
    return exception_text(exc) + tail


def raised_at(exc: BaseException) -> str:
    """``file.py:line in function`` of the innermost frame, or "" without a traceback."""
    tb = exc.__traceback__
    if tb is None:
        return ""
    frame = traceback.extract_tb(tb)[-1]
    return f"{_short(frame.filename)}:{frame.lineno} in {frame.name}"


def _short(path: str) -> str:
    parts = path.replace(os.sep, "/").split("/")
    return "/".join(parts[-2:])


def _exception_field(exc_info: Any) -> str | None:
    if exc_info is True:
        exc_info = sys.exc_info()
    if isinstance(exc_info, tuple):
        exc_info = exc_info[1]
    if not isinstance(exc_info, BaseException):
        return None
    frames = traceback.extract_tb(exc_info.__traceback__)[-8:]
    where = " < ".join(f"{_short(f.filename)}:{f.lineno} in {f.name}" for f in reversed(frames))
    text = exception_text(exc_info)
    if isinstance(exc_info, SagaError):
        text = f"{type(exc_info).__name__}: {text}"
    else:
        text = text.split(" at ", 1)[0]
    return f"{text} [{where}]" if where else text


def _unknown(name: str, value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if not isinstance(value, str):
        return f"[redacted {type(value).__name__}]"
    if _CONTENT_NAME.search(name) or looks_secret(value):
        return MASK
    if len(value) > UNKNOWN_LIMIT:
        return f"[redacted {len(value)} chars]"
    return value


def redact(_logger: Any, _method: str, event_dict: MutableMapping[str, Any]) -> Any:
    """The structlog processor: allow-listed fields, scrubbed text, safe exceptions."""
    exc_info = event_dict.pop("exc_info", None)
    event_dict.pop("stack_info", None)
    for name, value in event_dict.items():  # values change in place; no key is added
        if name in _PASSING:
            continue
        if name in FREE_TEXT:
            if isinstance(value, str):
                event_dict[name] = _scrub_short(value) if len(value) <= 80 else scrub_text(value)
            elif value is not None and not isinstance(value, (int, float)):
                event_dict[name] = scrub_text(str(value))
        elif not name.startswith("_"):  # "_...": structlog's (ProcessorFormatter's _record)
            event_dict[name] = _unknown(name, value)
    if exc_info:
        field = _exception_field(exc_info)
        if field:
            event_dict["exception"] = scrub_text(field, limit=2000)
    return event_dict


def reference_text(ref: str) -> str:
    """A document reference as shown to people and scripts: a URL without credentials,
    query or fragment (a signed URL's token stays where it is needed, with the router)."""
    if "://" not in ref:
        return ref
    from urllib.parse import urlsplit, urlunsplit

    try:
        u = urlsplit(ref)
        host = u.hostname or ""
        netloc = f"{host}:{u.port}" if u.port else host
    except ValueError:
        return ref.split("?", 1)[0].split("#", 1)[0]
    cut = "?…" if u.query else ""
    return urlunsplit((u.scheme, netloc, u.path, "", "")) + cut


REFERENCE_MASK = "[document]"
"""What replaces a document reference (or a part of one) cut out of an error message."""
_MIN_PART = 4
"""Shorter parts of a reference (``a``, ``pdf``, ``tmp``) are not cut: they would cut words."""


def without_references(text: str, refs: list[str]) -> str:
    """``text`` with every reference in ``refs`` cut out: the whole reference, as written
    and percent-decoded, and each part of it that a message could quote (the path, each
    path segment and file stem, the query and each query value). Case-insensitive.

    This is the net under ``saga.steps.errors``'s rule, not the rule: it knows the very
    values to hide (those the attempt passed to the document port), so it holds for a
    message that names them however it was written, and costs nothing unless a step failed.
    """
    forms = sorted({f for ref in refs if ref for f in reference_forms(ref)}, key=len, reverse=True)
    if not forms:
        return text
    pattern = re.compile("|".join(map(re.escape, forms)), re.IGNORECASE)
    return pattern.sub(REFERENCE_MASK, text)


def reference_forms(ref: str) -> set[str]:
    """The strings a message might quote of ``ref`` (see ``without_references``)."""
    from pathlib import PurePosixPath
    from urllib.parse import parse_qsl, unquote, urlsplit

    whole = {ref, unquote(ref), reference_text(ref)}
    parts: set[str] = set()
    try:
        u = urlsplit(ref)
        path, query = u.path, u.query
    except ValueError:
        path, query = ref, ""
    for raw in (path, unquote(path)):
        whole.add(raw)
        for segment in PurePosixPath(raw).parts:
            parts |= {segment, PurePosixPath(segment).stem}
    if query:
        whole |= {query, unquote(query)}
        parts |= {v for _, v in parse_qsl(query, keep_blank_values=True)}
        parts |= {pair.partition("=")[2] for pair in query.split("&")}  # as written: a+b
    forms = {f for f in whole if f and f != "/"} | {p for p in parts if len(p) >= _MIN_PART}
    return {f.strip() for f in forms if f.strip() and f.strip() != "/"}


def error_detail_of(exc: BaseException, refs: list[str]) -> str:
    """What an operator may read of a failed attempt (sealed before it is stored): a step
    error's ``detail``, or its whole message when the message named a reference; for any
    other exception its type and message (a library's message can echo a prompt or a
    path: that is why it is sealed, never shown to a viewer, and not stored without a
    key). Keys are masked even here."""
    said = str(exc)[:1000]
    if not isinstance(exc, SagaError):
        return scrub_text(f"{type(exc).__name__}: {said}", 2000, opaque=False)
    detail = str(getattr(exc, "detail", "") or "")
    if not detail and without_references(said, refs) != said:
        detail = said
    return scrub_text(detail, 2000, opaque=False)
