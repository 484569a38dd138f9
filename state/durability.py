"""The check that the server can give what ``SAGA_COMMIT_DURABILITY`` promises, before a
process acknowledges its first start or commit: ``fsync`` needs ``WAITAOF`` (Redis 7.2+,
Valkey 8+) and the append-only file on, on every primary."""

from __future__ import annotations

from typing import Any

from redis.asyncio import Redis
from redis.exceptions import NoPermissionError, ResponseError

from saga.state.errors import DurabilityError
from saga.state.limits import StateLimits

_PROBE_MS = 50
"""How long the probe's ``WAITAOF`` may wait (its connection may have pending writes)."""


async def check_durability(client: Any, limits: StateLimits) -> None:
    """Raise DurabilityError (one sentence) if the server cannot fsync-acknowledge what
    ``limits`` asks. A no-op for ``local`` and ``replica``."""
    if not limits.commit_fsync:
        return
    probe = ("WAITAOF", 1, 0, _PROBE_MS)
    try:
        if isinstance(client, Redis):
            await client.execute_command(*probe)
        else:  # a cluster: every primary answers for its own AOF
            await client.execute_command(*probe, target_nodes=client.PRIMARIES)
    except NoPermissionError:
        raise  # the one sentence about the Redis user's grants
    except ResponseError as exc:
        raise DurabilityError(await _why(client, str(exc))) from None


async def _why(client: Any, error: str) -> str:
    lowered = error.lower()
    if "appendonly" in lowered:
        return (
            "SAGA_COMMIT_DURABILITY=fsync needs the server's append-only file, which is off; "
            "turn it on (appendonly yes) or set SAGA_COMMIT_DURABILITY=local"
        )
    if "unknown command" in lowered:
        return (
            f"SAGA_COMMIT_DURABILITY=fsync needs WAITAOF (Redis 7.2+ or Valkey 8+), which "
            f"the server{await _version(client)} lacks; use a newer server or set "
            "SAGA_COMMIT_DURABILITY=local"
        )
    return f"SAGA_COMMIT_DURABILITY=fsync: the server refused WAITAOF ({error})"


async def _version(client: Any) -> str:
    """`` (redis 7.0.15)`` from HELLO, or "" if the server will not say."""
    try:
        hello = await client.execute_command("HELLO")
    except Exception:  # only a nicer sentence is lost
        return ""
    if isinstance(hello, list):
        hello = dict(zip(hello[::2], hello[1::2], strict=False))
    if not isinstance(hello, dict):
        return ""
    info = {(k.decode() if isinstance(k, bytes) else str(k)): v for k, v in hello.items()}
    server, version = info.get("server", b""), info.get("version", b"")
    server = server.decode() if isinstance(server, bytes) else str(server)
    version = version.decode() if isinstance(version, bytes) else str(version)
    return f" ({server} {version})" if version else ""
