"""Per-user LLM keys from the billing service, cached in Redis for every executor.

``BillingClient.key_for(user)`` reads the cache (24 h TTL); on a miss one
executor takes a short single-flight lock (``SET NX PX``) and fetches
``GET {base_url}/users/{user}/key`` -> ``{"key": "sk-..."}`` while the others
poll the cache with a short backoff, and take the lock themselves if it
expires without a result. ``invalidate(user)`` drops the cached key after the
LLM provider answered 401, so the next ``key_for`` fetches a fresh one.

Mapping onto the LiteLLM proxy: the billing service is a thin service in
front of the proxy's key API. For ``GET /users/{user}/key`` it looks the
user's virtual key up (``GET /user/info?user_id=`` lists a user's keys,
``GET /key/info`` checks one is still valid and within budget) and, when the
user has none, creates one with ``POST /key/generate`` (``{"user_id": ...,
"max_budget": ...}``, authorised by the proxy's master key, which never
leaves that service). The executors then call the proxy (``api_base``) with
the user's virtual key, so the proxy attributes spend and enforces budgets
per user; a revoked or rotated key answers 401, which is what
``invalidate`` is for.

Errors: 404 -> NotFoundError; other 4xx -> PermanentError; 429, 5xx,
timeouts and connection errors -> RetryableError and a breaker failure; an
open breaker -> CircuitOpenError. The key only ever travels inside a
``Secret``, whose repr and str are masked; response bodies are never logged.
"""

from __future__ import annotations

import secrets
import time
from typing import Any, Protocol

import anyio
import httpx
import structlog

from saga.adapters.breaker import CircuitBreaker, load_script
from saga.state.keys import Keys
from saga.steps.errors import NotFoundError, PermanentError, RetryableError
from saga.telemetry import tracing

__all__ = ["BillingClient", "KeyProvider", "Secret", "StaticKey", "UserKey"]

_log = structlog.get_logger("saga.billing")


class Secret:
    """A key that cannot leak through repr, str, logs or tracebacks' locals."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        """The key itself: call only where it is handed to the provider."""
        return self._value

    def __repr__(self) -> str:
        return "Secret('********')"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and secrets.compare_digest(self._value, other._value)

    def __hash__(self) -> int:
        return hash(self._value)

    def __reduce__(self) -> Any:
        raise TypeError("a Secret is not serialisable")


class KeyProvider(Protocol):
    """The user's key for one LLM client: fetched lazily, dropped after a 401."""

    async def get(self) -> Secret: ...

    async def invalidate(self) -> None: ...


class StaticKey:
    """One key for every user (no billing service configured); a 401 cannot be cured."""

    def __init__(self, key: Secret) -> None:
        self._key = key

    async def get(self) -> Secret:
        return self._key

    async def invalidate(self) -> None:
        return None


class BillingClient:
    """Fetches and caches per-user keys; one instance per process (it owns an HTTP pool)."""

    def __init__(
        self,
        base_url: str,
        redis: Any,
        keys: Keys,
        breaker: CircuitBreaker | None,
        *,
        timeout_s: float = 5.0,
        cache_ttl_s: float = 24 * 3600,
        lock_ttl_s: float = 10.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._redis = redis
        self._keys = keys
        self._breaker = breaker
        self._cache_ttl_ms = round(cache_ttl_s * 1000)
        self._lock_ttl_s = lock_ttl_s
        self._release = load_script(redis, "release_lock")
        self._http = httpx.AsyncClient(
            base_url=base_url.rstrip("/"),
            timeout=timeout_s,
            transport=transport,
            follow_redirects=False,
        )

    def __repr__(self) -> str:
        return f"BillingClient(base_url={str(self._http.base_url)!r})"

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> BillingClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def for_user(self, user_id: str) -> UserKey:
        """A KeyProvider bound to one user, for that user's LLM client."""
        return UserKey(self, user_id)

    async def invalidate(self, user_id: str) -> None:
        """Drop the cached key (the provider rejected it); the next key_for refetches."""
        await self._redis.delete(self._keys.billing_key(user_id))
        _log.info("billing_key_invalidated", user_id=user_id)

    async def key_for(self, user_id: str) -> Secret:
        """The user's key: from the cache, else fetched by one executor while others wait."""
        cache = self._keys.billing_key(user_id)
        lock = self._keys.billing_lock(user_id)
        token = secrets.token_hex(16)
        lock_ms = max(1, round(self._lock_ttl_s * 1000))
        # A holder that hangs loses its lock after lock_ttl; three of those is an outage.
        deadline = time.monotonic() + 3 * self._lock_ttl_s
        delay = 0.02
        while True:
            cached = await self._redis.get(cache)
            if cached is not None:
                return Secret(cached.decode())
            if await self._redis.set(lock, token, nx=True, px=lock_ms):
                try:
                    return await self._fill(user_id, cache)
                finally:
                    await self._release(keys=[lock], args=[token])
            if time.monotonic() >= deadline:
                raise RetryableError(f"timed out waiting for the billing key of user {user_id}")
            await anyio.sleep(delay)
            delay = min(delay * 2, 0.5)

    async def _fill(self, user_id: str, cache: str) -> Secret:
        # The previous holder may have filled the cache between our GET and our SET NX.
        cached = await self._redis.get(cache)
        if cached is not None:
            return Secret(cached.decode())
        key = await self._fetch(user_id)
        await self._redis.set(cache, key.reveal(), px=self._cache_ttl_ms)
        _log.info("billing_key_fetched", user_id=user_id)
        return key

    async def _fetch(self, user_id: str) -> Secret:
        """GET the user's key, as a child span ``billing key`` of the attempt."""
        with tracing.child_span("billing key", {"saga.user_id": user_id}):
            return await self._fetch_key(user_id)

    async def _fetch_key(self, user_id: str) -> Secret:
        if self._breaker is not None:
            await self._breaker.before_call()
        try:
            response = await self._http.get(f"/users/{user_id}/key")
        except httpx.HTTPError as exc:
            await self._outage()
            raise RetryableError(f"billing service unreachable ({type(exc).__name__})") from None
        status = response.status_code
        if status == 429 or status >= 500:
            await self._outage()
            raise RetryableError(f"billing service answered {status}")
        if self._breaker is not None:
            await self._breaker.record_success()
        if status == 404:
            raise NotFoundError(f"the billing service has no key for user {user_id}")
        if status >= 400:
            raise PermanentError(
                f"the billing service refused the key of user {user_id} ({status})"
            )
        return _parse_key(response)

    async def _outage(self) -> None:
        if self._breaker is not None:
            await self._breaker.record_failure()


def _parse_key(response: httpx.Response) -> Secret:
    try:
        body = response.json()
    except ValueError:
        body = None
    key = body.get("key") if isinstance(body, dict) else None
    if not isinstance(key, str) or not key:
        raise PermanentError(f"the billing service answered {response.status_code} without a key")
    return Secret(key)


class UserKey:
    """KeyProvider for one user, backed by a BillingClient."""

    def __init__(self, billing: BillingClient, user_id: str) -> None:
        self._billing = billing
        self.user_id = user_id

    def __repr__(self) -> str:
        return f"UserKey(user_id={self.user_id!r})"

    async def get(self) -> Secret:
        return await self._billing.key_for(self.user_id)

    async def invalidate(self) -> None:
        await self._billing.invalidate(self.user_id)
