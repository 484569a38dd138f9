"""The check that the server can give what ``SAGA_COMMIT_DURABILITY`` promises, before a
process acknowledges its first start or commit: ``fsync`` needs ``WAITAOF`` (Redis 7.2+,
Valkey 8+), the append-only file on, and ``appendfsync always``, on every primary.

Why ``always``: under ``appendfsync everysec`` the server (Valkey 9.1.2, measured with
strace and tests/faults/test_host_crash.py) answers ``WAITAOF`` with "fsynced locally"
at its next cron tick (~100 ms at hz 10) although it fsyncs only once a second: in a
host crash, starts so confirmed vanished. Under ``always`` it fsyncs before it replies,
and ``WAITAOF`` confirms it. The policy is read with ``CONFIG GET`` where the Redis user
may (least-privilege users may not: then docs/reliability.md is the operator's check)."""

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
    policies = await _fsync_policies(client)
    if any(p != "always" for p in policies):
        raise DurabilityError(
            f"SAGA_COMMIT_DURABILITY=fsync needs appendfsync always, and the server has "
            f"appendfsync {next(p for p in policies if p != 'always')} (under which it "
            "confirms WAITAOF before its fsync); set appendfsync always, or "
            "SAGA_COMMIT_DURABILITY=local"
        )


async def _fsync_policies(client: Any) -> list[str]:
    """Every primary's ``appendfsync``; [] where the user may not read the config."""
    try:
        if isinstance(client, Redis):
            replies = [await client.config_get("appendfsync")]
        else:
            found = await client.config_get("appendfsync", target_nodes=client.PRIMARIES)
            replies = (
                list(found.values()) if isinstance(found, dict) and not _flat(found) else [found]
            )
    except (NoPermissionError, ResponseError):  # managed services hide CONFIG too
        return []
    out = []
    for reply in replies:
        value = reply.get("appendfsync") if isinstance(reply, dict) else None
        if value is not None:
            out.append(value.decode() if isinstance(value, bytes) else str(value))
    return out


def _flat(reply: dict[Any, Any]) -> bool:
    """A cluster client's reply for one node is the config itself, not node -> config."""
    return "appendfsync" in reply or b"appendfsync" in reply


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
