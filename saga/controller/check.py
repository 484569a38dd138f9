"""``saga controller --check``: is this Redis ready for saga? (helm test, init checks)

Read-only: INFO (the recommended ACL grants ``+info``), XINFO GROUPS and SCRIPT
EXISTS. A failed check means saga cannot run as deployed; a warning means it runs
but can lose or drop work in a way the operator should decide on.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum
from typing import Any

import msgspec
from redis.exceptions import ResponseError

from saga.state.keys import GROUP, Keys
from saga.state.replies import text
from saga.state.scripts import load_all

MIN_MAJOR = 7
"""Redis 7 / Valkey 7.2: XINFO GROUPS reports the lag KEDA scales on."""


class Status(StrEnum):
    OK = "ok"
    WARN = "warn"
    FAIL = "fail"


class Check(msgspec.Struct, frozen=True):
    name: str
    status: Status
    detail: str


TypeSteps = tuple[Keys, Sequence[str]]


async def run_checks(
    client: Any, keys: Keys, steps: Sequence[str], others: Sequence[TypeSteps] = ()
) -> list[Check]:
    """Every check, in order; raises only when Redis cannot be reached at all. ``keys``
    and ``steps``: this deployment's saga type; ``others``: the other registered types."""
    await client.ping()
    server = await _info(client, "server")
    persistence = await _info(client, "persistence")
    memory = await _info(client, "memory")
    return [
        _version(server),
        await _groups(client, [(keys, steps), *others]),
        await _scripts(client),
        _aof(persistence),
        _eviction(memory),
    ]


async def _info(client: Any, section: str) -> dict[str, Any]:
    info = await client.info(section)
    if info and all(isinstance(v, dict) for v in info.values()):  # a cluster: one per node
        return dict(next(iter(info.values())))
    return dict(info)


def _version(server: dict[str, Any]) -> Check:
    version = str(server.get("valkey_version") or server.get("redis_version") or "?")
    name = "valkey" if server.get("valkey_version") else "redis"
    head = version.partition(".")[0]
    major = int(head) if head.isdigit() else 0
    if major < MIN_MAJOR:
        return Check("server", Status.FAIL, f"{name} {version}: saga needs Redis 7+ / Valkey 7.2+")
    return Check("server", Status.OK, f"{name} {version}")


async def _groups(client: Any, types: Sequence[TypeSteps]) -> Check:
    missing, total = [], 0
    for keys, steps in types:
        missing += await _missing_groups(client, keys, steps)
        total += len(steps) * keys.partitions
    if missing:
        more = f" and {len(missing) - 4} more" if len(missing) > 4 else ""
        shown = ", ".join(missing[:4]) + more
        return Check("groups", Status.FAIL, f"no group '{GROUP}' on {shown}: run `saga init`")
    names = ", ".join(
        step if k.saga_type == types[0][0].saga_type else f"{k.saga_type}/{step}"
        for k, steps in types
        for step in steps
    )
    return Check("groups", Status.OK, f"'{GROUP}' on {total} stream(s): {names}")


async def _missing_groups(client: Any, keys: Keys, steps: Sequence[str]) -> list[str]:
    missing = []
    for step in steps:
        for p in keys.all_partitions():
            try:
                groups = await client.xinfo_groups(keys.ready(p, step))
            except ResponseError:  # no such stream
                groups = []
            if not any(text(g.get("name")) == GROUP for g in groups):
                missing.append(keys.ready(p, step))
    return missing


async def _scripts(client: Any) -> Check:
    scripts = load_all()
    found = await client.script_exists(*[s.sha for s in scripts.values()])
    if isinstance(found, dict):  # a cluster: a list per node
        found = [all(col) for col in zip(*found.values(), strict=True)]
    absent = [name for name, ok in zip(scripts, found, strict=True) if not ok]
    if absent:
        names = ", ".join(absent) if len(absent) <= 3 else f"{len(absent)} of {len(scripts)}"
        detail = f"not loaded: {names} (each process loads its own on first use)"
        return Check("scripts", Status.WARN, detail)
    return Check("scripts", Status.OK, f"{len(scripts)} loaded")


def _aof(persistence: dict[str, Any]) -> Check:
    if int(persistence.get("aof_enabled") or 0) == 1:
        return Check("persistence", Status.OK, "appendonly yes")
    return Check(
        "persistence",
        Status.WARN,
        "AOF is off: a restart loses every saga in flight (set appendonly yes)",
    )


def _eviction(memory: dict[str, Any]) -> Check:
    policy = str(memory.get("maxmemory_policy") or "?")
    if policy == "noeviction":
        return Check("eviction", Status.OK, "maxmemory-policy noeviction")
    return Check(
        "eviction",
        Status.WARN,
        f"maxmemory-policy {policy} may silently delete sagas: use noeviction",
    )
