"""Redis clients for transitions: redis-py's silent retries are turned off.

A transition call that timed out may or may not have run; redis-py's default
retry would resend it blindly (observed: one call executed 11 times). Every
script is idempotent by its operation id, so *our* retry loop resends the same
op id, and a repeat is answered from the recorded result.
"""

from __future__ import annotations

from typing import Any

import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

TRANSIENT_ERRORS: tuple[type[BaseException], ...] = (
    RedisConnectionError,
    RedisTimeoutError,
    ConnectionError,
    TimeoutError,
)
"""Errors after which the server may be back soon: re-send, do not give up."""


def connect(url: str, *, cluster: bool = False, **options: Any) -> aioredis.Redis:
    """An asyncio client for ``url`` with automatic command retries disabled.

    Responses stay bytes: stream entries from outside may not be valid UTF-8,
    and msgspec decodes bytes directly.
    """
    options.setdefault("socket_timeout", 10.0)
    options.setdefault("socket_connect_timeout", 5.0)
    options.setdefault("health_check_interval", 15)
    if cluster:
        from redis.asyncio.cluster import RedisCluster

        client: Any = RedisCluster.from_url(
            url, retry=Retry(NoBackoff(), 0), decode_responses=False, **options
        )
        return client  # type: ignore[no-any-return]
    return aioredis.Redis.from_url(
        url,
        retry=Retry(NoBackoff(), 0),
        retry_on_timeout=False,
        decode_responses=False,
        **options,
    )
