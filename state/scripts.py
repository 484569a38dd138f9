"""Loads the Lua transitions: inlines includes, injects the shared tables, calls by SHA.

Each script is called with EVALSHA of its own content, so two releases never run
each other's scripts during a rolling deploy; on NOSCRIPT (a restarted, failed-over
or flushed server) the call is repeated with EVAL and the source — safe, because
NOSCRIPT means it did not run, and EVAL caches the script again. Not SCRIPT LOAD
then EVALSHA: a second flush between the two (a ``SCRIPT FLUSH`` storm) made the
repeat fail with NOSCRIPT again, and the worker exit.

An EVALSHA-only user (no ``+eval``, no ``+script|load``: deploy/redis/saga-users.acl,
docs/security.md) runs the scripts a loader user put there (``saga init``). When the
server has lost them (a restart, ``SCRIPT FLUSH``) such a user cannot put them back:
the call raises ScriptsMissingError, a transient error, so workers wait (not ready,
one log line saying what to run) and re-send once ``saga init`` has loaded them.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoPermissionError, NoScriptError, ResponseError

from saga.state.codes import RC
from saga.state.connection import TRANSIENT_ERRORS, NotReplicatedError
from saga.state.keys import index_position
from saga.state.model import SCHEMA_VERSION, SagaState


class ScriptsMissingError(RedisConnectionError):
    """The server lacks saga's scripts and this Redis user may not load them (an
    EVALSHA-only user): transient, so the caller waits and re-sends after backoff."""

    def __init__(self, missing: int | None = None) -> None:
        some = f"{missing} of saga's scripts are" if missing else "saga's scripts are"
        super().__init__(
            f"{some} not loaded on the server and this Redis user may not load them "
            "(EVALSHA-only): run `saga init` as the loader user (saga-loader)"
        )


def _refused_to_load(exc: BaseException) -> bool:
    """NOPERM for EVAL or SCRIPT LOAD themselves, not for a command inside a script."""
    text = str(exc).lower()
    return isinstance(exc, NoPermissionError) and ("'eval'" in text or "'script" in text)


_INCLUDE = re.compile(r"^--@include (\w+)\s*$", re.MULTILINE)

SCRIPT_NAMES = (
    "start_saga",
    "claim_steps",
    "extend_lease",
    "commit_steps",
    "fail_step",
    "promote_retries",
    "retry_saga",
    "cancel_saga",
    "recover_idle",
    "requeue_idle",
    "quarantine_entry",
    "prune_retired",
    "prune_consumers",
    "accept_review",
    "decide_review",
    "receive_record",
    "release_record",
    "unpark_sagas",
    "release_deferred",
    "compensate_saga",
    "claim_undo",
    "commit_undo",
    "fail_undo",
    "purge_record",
    "forget_user_costs",
    "park_wait",
    "signal_saga",
    "time_out_wait",
    "reserve_budget",
    "lapse_holds",
    "add_schedule",
    "pause_schedule",
    "resume_schedule",
    "remove_schedule",
    "advance_schedule",
    "release_lowered",
    "import_record",
    "reseal_values",
    "reseal_stream",
    "claim_items",
    "commit_items",
    "fail_items",
    "promote_items",
    "extend_item",
    "requeue_items",
)


def _preamble() -> str:
    """The tables every script shares, generated from the Python enums."""
    rc = ", ".join(f"{c.name}={c.value}" for c in RC)
    states = ", ".join(f"{s.name}='{s.value}'" for s in SagaState)
    pos = ", ".join(f"{s.value}={index_position(s)}" for s in SagaState)
    return (
        f"local RC = {{{rc}}}\n"
        f"local STATE = {{{states}}}\n"
        f"local STATE_POS = {{{pos}}}\n"
        f"local SCHEMA_VERSION = {SCHEMA_VERSION}\n"
    )


def _read(path: str) -> str:
    return resources.files("saga.state").joinpath("lua", path).read_text(encoding="utf-8")


def render(name: str) -> str:
    """The full source of one script: preamble, includes inlined in place."""
    source = _read(f"{name}.lua")
    seen: set[str] = set()

    def inline(match: re.Match[str]) -> str:
        inc = match.group(1)
        if inc in seen:
            return ""
        seen.add(inc)
        return _read(f"includes/{inc}.lua")

    return _preamble() + _INCLUDE.sub(inline, source)


@dataclass(frozen=True, slots=True)
class Script:
    name: str
    source: str
    sha: str


@cache
def load_all() -> dict[str, Script]:
    out = {}
    for name in SCRIPT_NAMES:
        source = render(name)
        out[name] = Script(name, source, hashlib.sha1(source.encode()).hexdigest())
    return out


def version() -> str:
    """A short digest of the whole script set (shown by ``saga config`` and /readyz)."""
    digest = hashlib.sha1("".join(s.sha for s in load_all().values()).encode())
    return digest.hexdigest()[:12]


async def ensure_loaded(client: Any, *, required: bool = False) -> None:
    """SCRIPT LOAD every script (one pipeline): done at start so /readyz can say so.

    A user that may not load scripts (EVALSHA-only) checks they are there instead,
    and raises ScriptsMissingError if not; ``required`` (``saga init``, the loader)
    raises the refusal itself.
    A cluster client sends each SCRIPT LOAD to every primary (its pipeline refuses
    keyless commands), so whichever node owns a partition can run the scripts."""
    try:
        await load_sources(client, [s.source for s in load_all().values()])
    except NoPermissionError as exc:
        if required or not _refused_to_load(exc):
            raise
        await require_present(client, [s.sha for s in load_all().values()])


async def load_sources(client: Any, sources: list[str]) -> None:
    """SCRIPT LOAD each source (one pipeline on a single server)."""
    if not isinstance(client, Redis):
        for source in sources:
            await client.script_load(source)
        return
    pipe = client.pipeline(transaction=False)
    for source in sources:
        pipe.script_load(source)
    await pipe.execute()


async def require_present(client: Any, shas: list[str]) -> None:
    """Raise ScriptsMissingError unless the server has every one of ``shas``."""
    found = await client.script_exists(*shas)
    missing = sum(1 for present in found if not present)
    if missing:
        raise ScriptsMissingError(missing)


async def eval_source(client: Any, source: str, keys: list[Any], args: list[Any]) -> Any:
    """EVAL after NOSCRIPT; ScriptsMissingError for a user that may not (EVALSHA-only)."""
    try:
        return await client.eval(source, len(keys), *keys, *args)
    except NoPermissionError as exc:
        if _refused_to_load(exc):
            raise ScriptsMissingError() from exc
        raise


async def evalsha(client: Any, name: str, keys: list[str], args: list[Any]) -> Any:
    """Run one script by SHA; by its source (EVAL) if the server does not have it."""
    script = load_all()[name]
    try:
        return await client.evalsha(script.sha, len(keys), *keys, *args)
    except NoScriptError:
        return await eval_source(client, script.source, keys, args)


async def evalsha_many(
    client: Any,
    calls: list[tuple[str, list[str], list[Any]]],
    *,
    replicas: int = 0,
    fsync: bool = False,
    wait_ms: int = 1000,
) -> list[Any]:
    """Run several scripts in one pipeline (one round trip); each stays its own atomic call.

    ``replicas`` > 0 ends the pipeline with one ``WAIT replicas wait_ms`` per node it
    wrote to (in the same round trip); ``fsync`` with one ``WAITAOF 1 replicas wait_ms``
    instead (the node's own AOF fsynced, and ``replicas`` replicas' AOFs): fewer
    acknowledgements raise NotReplicatedError.

    Results are returned in order; an exception is returned in place of a failed
    call's result. NOSCRIPT entries are re-run with EVAL (they did not execute).
    A call refused for an outage (a cluster client's pipeline returns CLUSTERDOWN or
    TRYAGAIN in place) is raised, so the caller's resend repeats the whole batch:
    every script is idempotent, and the calls that did run answer as duplicates.
    """
    if not calls:
        return []
    durable: dict[str, Any] = (
        {"replicas": replicas, "fsync": fsync, "wait_ms": wait_ms} if replicas or fsync else {}
    )
    results = await _pipeline(client, calls, **durable)
    refused = next((r for r in results if isinstance(r, TRANSIENT_ERRORS)), None)
    if refused is not None:
        raise refused
    missing = [i for i, r in enumerate(results) if isinstance(r, NoScriptError)]
    if missing:
        again = await _pipeline(client, [calls[i] for i in missing], by_source=True, **durable)
        if any(_refused_to_load(r) for r in again):
            raise ScriptsMissingError(len(missing))  # none ran: the resend repeats them
        for i, r in zip(missing, again, strict=True):
            results[i] = r
    return results


async def _pipeline(
    client: Any,
    calls: list[tuple[str, list[str], list[Any]]],
    *,
    by_source: bool = False,
    replicas: int = 0,
    fsync: bool = False,
    wait_ms: int = 0,
) -> list[Any]:
    scripts = load_all()
    if by_source:
        commands = [("EVAL", scripts[n].source, len(k), *k, *a) for n, k, a in calls]
    else:
        commands = [("EVALSHA", scripts[n].sha, len(k), *k, *a) for n, k, a in calls]
    wait: tuple[Any, ...] = ()
    if fsync:  # the node's AOF on disk (and ``replicas`` replicas' AOFs), not only in memory
        wait = ("WAITAOF", 1, replicas, wait_ms)
    elif replicas:
        wait = ("WAIT", replicas, wait_ms)
    if not isinstance(client, Redis):  # a cluster client routes each call: its own pipeline
        pipe = client.pipeline(transaction=False)
        for command in commands:
            pipe.execute_command(*command)
        # One wait per node written to, after its scripts on the same connection.
        nodes = {n.name: n for n in map(client.get_node_from_key, (k[0] for _, k, _ in calls))}
        for node in nodes.values() if wait else ():
            pipe.execute_command(*wait, target_nodes=node)
        replies = list(await pipe.execute(raise_on_error=False))
    else:
        replies = await _send_all(client, [*commands, wait] if wait else commands)
    for acked in replies[len(commands) :]:
        _check_acked(acked, wait)
    return replies[: len(commands)]


def _check_acked(acked: Any, wait: tuple[Any, ...]) -> None:
    """Raise NotReplicatedError unless a WAIT or WAITAOF reply counts every copy asked for
    (the writes ran, but are not yet as safe as the setting promises: re-send them)."""
    name, wait_ms = wait[0], wait[-1]
    if isinstance(acked, Exception):  # e.g. the node became a replica: re-send
        raise NotReplicatedError(f"{name} refused ({acked})") from acked
    if name == "WAIT":
        if acked < wait[1]:
            raise NotReplicatedError(
                f"{acked} of {wait[1]} replica(s) acknowledged in {wait_ms} ms"
            )
        return
    local, remote = (int(n) for n in acked)
    if local < 1 or remote < wait[2]:
        raise NotReplicatedError(
            f"the AOF fsync was confirmed by {local} of 1 primary and {remote} of "
            f"{wait[2]} replica(s) in {wait_ms} ms"
        )


async def _send_all(client: Redis, commands: list[tuple[Any, ...]]) -> list[Any]:
    """One write of every command on one pooled connection, then each reply in order
    (an error reply in place). What redis-py's Pipeline does for scripts, without its
    per-call bookkeeping (metrics hooks, field-set preparation, response callbacks):
    ~6 µs less per commit, paid on every step transition (saga bench profile)."""
    pool = client.connection_pool
    conn = await pool.get_connection()
    try:
        await conn.send_packed_command(conn.pack_commands(commands))
        replies: list[Any] = []
        for _ in commands:
            try:
                replies.append(await conn.read_response())
            except ResponseError as exc:
                replies.append(exc)
        return replies
    except BaseException:
        # Replies may be left unread on the socket (a drop, a cancellation): never reuse it.
        await conn.disconnect()
        raise
    finally:
        await pool.release(conn)
