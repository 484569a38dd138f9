"""Redis clients for transitions: redis-py's silent retries are turned off.

A transition call that timed out may or may not have run; redis-py's default
retry would resend it blindly (observed: one call executed 11 times). Every
script is idempotent by its operation id, so *our* retry loop resends the same
op id, and a repeat is answered from the recorded result.
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Any

import redis.asyncio as aioredis
from redis.asyncio.connection import AbstractConnection
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import (
    AuthenticationError,
    ClusterDownError,
    ClusterError,
    InvalidResponse,
    NoPermissionError,
    SlotNotCoveredError,
    TryAgainError,
)
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from saga.state.errors import SagaError

try:
    import hiredis
except ImportError:  # pragma: no cover - hiredis is a dependency (redis[hiredis])
    hiredis = None  # type: ignore[assignment]

_PACKABLE = frozenset({bytes, str, int, float})
"""Exact types hiredis packs byte for byte as redis-py's Encoder does (bool, None,
subclasses, memoryviews go through redis-py)."""


class NotReplicatedError(RedisConnectionError):
    """A write the primary ran but no replica acknowledged within the wait
    (``SAGA_COMMIT_DURABILITY=replica``): not yet safe from a failover, so the caller
    re-sends it (its op id makes the repeat a no-op) or reports it unconfirmed."""


TRANSIENT_ERRORS: tuple[type[BaseException], ...] = (
    RedisConnectionError,
    RedisTimeoutError,
    ConnectionError,
    TimeoutError,
    # A cluster reconfiguring: a primary down (CLUSTERDOWN, MASTERDOWN), keys of one
    # call split by a slot migration (TRYAGAIN), a slot map not yet complete. The
    # command was refused, not run, and every transition is idempotent by its op id.
    ClusterDownError,
    TryAgainError,
    SlotNotCoveredError,
    # redis-py's cluster client follows ASK/MOVED and TRYAGAIN 16 times in a row, then
    # gives up with "TTL exhausted": a slot whose keys are half moved keeps a script's
    # keys split (TRYAGAIN) as long as the migration lasts. Nothing ran: re-send.
    ClusterError,
)
"""Errors after which the server may be back soon: re-send, do not give up."""


class RedisUrlError(SagaError, ValueError):
    """A Redis URL that cannot be parsed (scheme, port, query)."""

    def __init__(self, url: str, reason: str) -> None:
        super().__init__(f"{mask_url(url)!r} is not a Redis URL ({reason})")
        self.url, self.reason = mask_url(url), reason


class Failure(StrEnum):
    """Why talking to Redis failed, as an operator would act on it."""

    INVALID_URL = "invalid_url"
    AUTH = "auth"
    """The server refused the credentials (or asked for some)."""
    PERMISSION = "permission"
    """The credentials work, but the user may not run a command saga needs."""
    NOT_REDIS = "not_redis"
    """Something answered, but not in the Redis protocol."""
    UNREACHABLE = "unreachable"


def connection_failure(exc: BaseException) -> tuple[Failure, str] | None:
    """What went wrong reaching Redis and a short reason, or None for any other error.

    redis-py makes an authentication failure a ConnectionError: it is told apart
    here, so nobody is sent to look for a network problem when a password is wrong.
    """
    if isinstance(exc, RedisUrlError):
        return Failure.INVALID_URL, str(exc)
    if isinstance(exc, AuthenticationError):
        return Failure.AUTH, _first_line(exc)
    if isinstance(exc, NoPermissionError):
        return Failure.PERMISSION, _first_line(exc)
    if isinstance(exc, InvalidResponse):
        return Failure.NOT_REDIS, _first_line(exc)
    if isinstance(exc, RedisConnectionError | RedisTimeoutError | OSError):
        return Failure.UNREACHABLE, f"{type(exc).__name__}: {_first_line(exc)}"
    return None


def mask_url(url: str) -> str:
    """``url`` with its password replaced by ``***``."""
    return re.sub(r"//([^@/]*):([^@/]*)@", r"//\1:***@", url)


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [""])[0][:200]


def connect(url: str, *, cluster: bool = False, **options: Any) -> aioredis.Redis:
    """An asyncio client for ``url`` with automatic command retries disabled.

    Responses stay bytes: stream entries from outside may not be valid UTF-8,
    and msgspec decodes bytes directly. A URL that cannot be parsed raises
    RedisUrlError before any connection is tried.
    """
    try:
        return _connect(url, cluster=cluster, **options)
    except ValueError as exc:  # redis-py's and urllib's parse errors
        raise RedisUrlError(url, _first_line(exc).rstrip(".")) from None


def _connect(url: str, *, cluster: bool, **options: Any) -> aioredis.Redis:
    options.setdefault("socket_timeout", 10.0)
    options.setdefault("socket_connect_timeout", 5.0)
    options.setdefault("health_check_interval", 15)
    if cluster:
        from redis.asyncio.cluster import RedisCluster

        client: Any = RedisCluster.from_url(
            url, retry=Retry(NoBackoff(), 0), decode_responses=False, **options
        )
        # The cluster client takes no connection class: set it in the arguments its
        # node manager makes nodes with (one dict), and on the nodes already made.
        kwargs = client.nodes_manager.connection_kwargs
        base = _hiredis_packing(_close_race_safe(kwargs["connection_class"]))
        safe = _asking_on_same_connection(base)
        kwargs["connection_class"] = safe
        for node in client.nodes_manager.startup_nodes.values():
            node.connection_class = safe
        return client  # type: ignore[no-any-return]
    plain: aioredis.Redis = aioredis.Redis.from_url(
        url,
        retry=Retry(NoBackoff(), 0),
        retry_on_timeout=False,
        decode_responses=False,
        **options,
    )
    pool = plain.connection_pool
    pool.connection_class = _hiredis_packing(_close_race_safe(pool.connection_class))
    return plain


def _close_race_safe(base: type[AbstractConnection]) -> type[AbstractConnection]:
    """``base`` raising ConnectionError, not AttributeError or TypeError, when another
    task closed its socket in the middle of a write (redis-py issues #3546 and #4287,
    unfixed in 8.1). A cluster client closes every connection on CLUSTERDOWN while
    other tasks are writing; the raw error escaped every retry and crashed a worker
    (tests/cluster, a primary stopped mid-run)."""

    class CloseRaceSafe(base):  # type: ignore[valid-type,misc]
        async def send_packed_command(self, command: Any, check_health: bool = True) -> None:
            try:
                await super().send_packed_command(command, check_health)
            except (AttributeError, TypeError) as exc:
                # The race's mark: the writer or its transport already torn down
                # ('NoneType' object has no attribute 'writelines' / is not callable).
                # redis-py has disconnected the connection by now; anything else stays loud.
                if "'NoneType'" not in str(exc):
                    raise
                raise RedisConnectionError(f"connection closed during a write ({exc})") from exc

    CloseRaceSafe.__name__ = CloseRaceSafe.__qualname__ = f"CloseRaceSafe{base.__name__}"
    return CloseRaceSafe


def _asking_on_same_connection(base: type[AbstractConnection]) -> type[AbstractConnection]:
    """``base`` sending a cluster client's ASKING in the same write as the command it is
    for. redis-py sends ASKING as a command of its own on one pooled connection and
    the redirected command on the next free one (a FIFO pool): under load they differ,
    the importing node answers MOVED back to the source, which answers ASK again,
    until "TTL exhausted" (tests/cluster/test_cluster_reshard, a slot moved under
    load). Here ASKING is only noted for its node (answered OK, nothing sent) and put
    in front of the next command packed for that node. Nothing yields between the
    two, so no other command of the client can take it; one class per client."""
    asking: set[tuple[str, int]] = set()

    class AskingSafe(base):  # type: ignore[valid-type,misc]
        _skip = 0
        _fake_ok = False

        def pack_command(self, *args: Any) -> list[bytes]:
            node = (self.host, self.port)
            if len(args) == 1 and str(args[0]).upper() == "ASKING":
                asking.add(node)
                self._fake_ok = True
                return []
            if node in asking:
                asking.discard(node)
                self._skip += 1
                return [*super().pack_command("ASKING"), *super().pack_command(*args)]
            return list(super().pack_command(*args))

        async def send_packed_command(self, command: Any, check_health: bool = True) -> None:
            if command:  # a noted ASKING sends nothing (and must not yield to connect)
                await super().send_packed_command(command, check_health)

        async def read_response(self, *args: Any, **kwargs: Any) -> Any:
            if self._fake_ok:
                self._fake_ok = False
                return b"OK"
            while self._skip:
                self._skip -= 1
                await super().read_response(*args, **kwargs)  # ASKING's +OK
            return await super().read_response(*args, **kwargs)

        async def disconnect(self, *args: Any, **kwargs: Any) -> None:
            self._skip, self._fake_ok = 0, False  # replies of a dropped socket never come
            await super().disconnect(*args, **kwargs)

    AskingSafe.__name__ = AskingSafe.__qualname__ = f"AskingSafe{base.__name__}"
    return AskingSafe


def _hiredis_packing(base: type[AbstractConnection]) -> type[AbstractConnection]:
    """``base`` packing commands with hiredis's C packer, as redis-py's sync client
    does; its asyncio client packs in Python (~15 µs for a commit script's 33
    arguments, ~2 µs in C; the bytes are the same). Other argument types (or no
    hiredis) take redis-py's own path, with its errors."""
    if hiredis is None:
        return base

    class HiredisPacking(base):  # type: ignore[valid-type,misc]
        def pack_command(self, *args: Any) -> list[bytes]:
            if isinstance(args[0], str):
                args = (*args[0].encode().split(), *args[1:])
            elif b" " in args[0]:
                args = (*args[0].split(), *args[1:])
            # One C-level pass over the types (a Python loop here was ~5% of a worker).
            if not _PACKABLE.issuperset(map(type, args)):
                return super().pack_command(*args)  # type: ignore[no-any-return]
            return [hiredis.pack_command(args)]

    HiredisPacking.__name__ = HiredisPacking.__qualname__ = f"Hiredis{base.__name__}"
    return HiredisPacking
