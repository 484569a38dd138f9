"""The nested groups of ``Settings``: the breakers' policy and the console's settings,
with the reader of ``SAGA_CONSOLE_*`` (``saga.config.settings.load_settings`` calls it)."""

from __future__ import annotations

from typing import Any

import msgspec


class BreakerSettings(msgspec.Struct, frozen=True, kw_only=True):
    """``SAGA_BREAKER_*``: one policy for every breaker (llm, embedding, billing); each
    breaker counts its own failures."""

    failures: int = 5
    """Failures within ``window_s`` that open a dependency's circuit."""
    window_s: float = 30.0
    cooldown_s: float = 30.0
    """How long an open circuit waits before letting one probe through."""


class ConsoleSettings(msgspec.Struct, frozen=True, kw_only=True):
    """``saga console``: where it listens and how people sign in (``SAGA_CONSOLE_*``)."""

    host: str = "127.0.0.1"
    port: int = 8090
    token_file: str = ""
    """Tokens in a file, one ``<name> <role> <token or sha256:hex>`` a line, besides those
    stored in Redis (``saga console token add``)."""
    secret: str = ""
    """``SAGA_CONSOLE_SECRET`` (secret, at least 32 characters): the HMAC key tokens and
    sessions are stored under, held by the console and never in Redis."""
    secret_file: str = ""
    """``SAGA_CONSOLE_SECRET_FILE``: a file holding it, when ``secret`` is unset."""
    auth_header: str = ""
    """Forward-auth: the header an auth proxy puts the signed-in user in (e.g.
    ``X-Forwarded-User``); "" turns the mode off. Trusted only from ``trusted_proxies``."""
    groups_header: str = "X-Forwarded-Groups"
    operator_group: str = "saga-operators"
    """Forward-auth: users in this group (comma-separated groups header) are operators."""
    reviewer_group: str = "saga-reviewers"
    """Forward-auth: users in this group (and not the operators') are reviewers."""
    trusted_proxies: tuple[str, ...] = ("127.0.0.1/32", "::1/128")
    """Networks whose requests may carry the forward-auth headers."""
    session_ttl_s: int = 8 * 3600
    start_rate: float = 20.0
    """``SAGA_CONSOLE_START_RATE``: requests a second each token may make to the start API
    (``/api/v1/sagas``) after its burst; 0 turns the limit off."""
    start_burst: int = 40
    """``SAGA_CONSOLE_START_BURST``: requests a token may make at once before the rate holds."""


def console_settings(get: Any, num: Any) -> ConsoleSettings:
    """``SAGA_CONSOLE_*`` (``get`` and ``num`` read and check one variable)."""
    proxies = get("SAGA_CONSOLE_TRUSTED_PROXIES", "127.0.0.1/32,::1/128").split(",")
    return ConsoleSettings(
        host=get("SAGA_CONSOLE_HOST", "127.0.0.1"),
        port=int(num("SAGA_CONSOLE_PORT", 8090, int)),
        token_file=get("SAGA_CONSOLE_TOKEN_FILE"),
        secret=get("SAGA_CONSOLE_SECRET"),
        secret_file=get("SAGA_CONSOLE_SECRET_FILE"),
        auth_header=get("SAGA_CONSOLE_AUTH_HEADER"),
        groups_header=get("SAGA_CONSOLE_GROUPS_HEADER", "X-Forwarded-Groups"),
        operator_group=get("SAGA_CONSOLE_OPERATOR_GROUP", "saga-operators"),
        reviewer_group=get("SAGA_CONSOLE_REVIEWER_GROUP", "saga-reviewers"),
        trusted_proxies=tuple(n.strip() for n in proxies if n.strip()),
        session_ttl_s=int(num("SAGA_CONSOLE_SESSION_TTL", 8 * 3600, int)),
        start_rate=num("SAGA_CONSOLE_START_RATE", 20.0),
        start_burst=max(1, int(num("SAGA_CONSOLE_START_BURST", 40, int))),
    )
