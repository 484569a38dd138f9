"""Helpers shared by the state-machine tests: reading streams the way an executor does,
waiting on conditions with a deadline, and type-aware snapshots of a key prefix."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio

from saga.state.history_codec import event_fields
from saga.state.keys import GROUP, Keys
from saga.state.machine import StateMachine
from saga.state.model import Claim
from saga.state.replies import text

STEPS = ("router", "parser", "grouper")
NEXT = {"router": "parser", "parser": "grouper", "grouper": ""}
PREV = {"router": "_input", "parser": "router", "grouper": "parser"}
LEASE_MS = 30_000
MAX_LEASE_EXPIRIES = 3


# -- executor-side reads --------------------------------------------------------
async def read_ready(
    client: Any, keys: Keys, step: str, worker: str, count: int = 10, *, partition: int = 0
) -> list[tuple[str, str]]:
    """XREADGROUP new entries of a step's ready stream: (entry id, record id) pairs."""
    reply = await client.xreadgroup(GROUP, worker, {keys.ready(partition, step): ">"}, count=count)
    rows = reply.values() if isinstance(reply, dict) else [r[1] for r in reply or []]
    out = []
    for batch in rows:
        entries = batch[0] if batch and isinstance(batch[0], list) else batch
        for entry_id, fields in entries:
            out.append((text(entry_id), text(fields[b"rid"])))
    return out


async def claim_next(
    sm: StateMachine,
    step: str,
    worker: str,
    *,
    lease_ms: int = LEASE_MS,
    max_lease_expiries: int = MAX_LEASE_EXPIRIES,
    **kwargs: Any,
) -> Claim:
    """Read exactly one ready entry of ``step`` and claim it; the claim must succeed."""
    entries = await read_ready(sm.client, sm.keys, step, worker, count=1)
    assert len(entries) == 1, entries
    outcomes = await sm.claim(
        step,
        0,
        entries,
        worker=worker,
        lease_ms=lease_ms,
        max_lease_expiries=max_lease_expiries,
        **kwargs,
    )
    assert outcomes[0].claim is not None, outcomes
    return outcomes[0].claim


def but_fop(h: dict[str, str]) -> dict[str, str]:
    """A saga hash without 'fop' (the op id of the last refused zombie's call)."""
    return {k: v for k, v in h.items() if k != "fop"}


async def server_ms(client: Any) -> int:
    sec, usec = await client.execute_command("TIME")
    return int(sec) * 1000 + int(usec) // 1000


async def wait_until(
    predicate: Callable[[], Awaitable[bool]], *, within: float = 5.0, what: str = "condition"
) -> None:
    """Poll ``predicate`` until it holds; fail the test when the deadline passes."""
    deadline = time.monotonic() + within
    while not await predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {within}s waiting for {what}")
        await anyio.sleep(0.002)


async def wait_lease_expired(client: Any, lease_until_ms: int) -> None:
    """Wait until the server clock (the only clock leases use) has passed a deadline."""

    async def passed() -> bool:
        return await server_ms(client) > lease_until_ms

    await wait_until(passed, what=f"server time past {lease_until_ms}")


# -- inspection -----------------------------------------------------------------
class SagaFields(dict[str, str]):
    """A saga hash's fields; one that is not stored reads as "" (the scripts write no
    field for what is empty: start_saga's document, trace and token; commit's error)."""

    def __missing__(self, name: str) -> str:
        return ""


async def saga_hash(client: Any, keys: Keys, record_id: str) -> dict[str, str]:
    raw = await client.hgetall(keys.saga(record_id))
    return SagaFields({text(k): text(v) for k, v in raw.items()})


async def history(client: Any, keys: Keys, record_id: str) -> list[dict[str, str]]:
    rows = await client.xrange(keys.history(record_id))
    return [{text(k): text(v) for k, v in event_fields(f).items()} for _, f in rows]


async def events(client: Any, keys: Keys, record_id: str) -> list[str]:
    return [e["e"] for e in await history(client, keys, record_id)]


async def pending(client: Any, stream: str) -> list[dict[str, Any]]:
    """The group's pending entries: id, consumer, idle ms, deliveries."""
    rows = await client.xpending_range(stream, GROUP, "-", "+", 1000)
    return [
        {
            "id": text(r["message_id"]),
            "consumer": text(r["consumer"]),
            "idle": int(r["time_since_delivered"]),
            "deliveries": int(r["times_delivered"]),
        }
        for r in rows
    ]


async def pending_ids(client: Any, stream: str) -> set[str]:
    return {r["id"] for r in await pending(client, stream)}


async def stream_rows(client: Any, stream: str) -> list[tuple[str, dict[str, str]]]:
    """A stream's entries (a history's packed events opened: state/history_codec)."""
    rows = await client.xrange(stream)
    return [(text(i), {text(k): text(v) for k, v in event_fields(f).items()}) for i, f in rows]


async def last_delivered(client: Any, stream: str) -> str:
    groups = await client.xinfo_groups(stream)
    for g in groups:
        if text(g.get("name") or g.get(b"name")) == GROUP:
            return text(g.get("last-delivered-id") or g.get(b"last-delivered-id"))
    raise AssertionError(f"no group {GROUP} on {stream}")


async def keys_under(client: Any, prefix: str) -> list[str]:
    found: list[str] = []
    cursor = 0
    while True:
        cursor, batch = await client.scan(cursor, match=f"{prefix}*", count=500)
        found += [text(k) for k in batch]
        if int(cursor) == 0:
            return sorted(found)


async def snapshot(client: Any, prefix: str) -> dict[str, Any]:
    """Every key under ``prefix``, dumped by type, plus each stream's group state.

    Idle times are left out (they change with the clock); whether a key has a TTL
    is kept, its exact value is not.
    """
    out: dict[str, Any] = {}
    for key in await keys_under(client, prefix):
        kind = text(await client.type(key))
        ttl = await client.pttl(key)
        if kind == "hash":
            raw = await client.hgetall(key)
            value: Any = {text(k): bytes(v) for k, v in raw.items()}
        elif kind == "stream":
            value = {"entries": await stream_rows(client, key), "groups": []}
            for raw_group in await client.xinfo_groups(key):
                g = {text(k): v for k, v in raw_group.items()}
                summary = await client.xpending(key, text(g["name"]))
                rows = await client.xpending_range(key, text(g["name"]), "-", "+", 1000)
                value["groups"].append(
                    {
                        "name": text(g["name"]),
                        "last": text(g["last-delivered-id"]),
                        "read": g.get("entries-read"),
                        "lag": g.get("lag"),
                        "pending": summary["pending"],
                        "consumers": sorted(
                            (text(c["name"]), int(c["pending"])) for c in summary["consumers"]
                        ),
                        "pel": [
                            (text(r["message_id"]), text(r["consumer"]), r["times_delivered"])
                            for r in rows
                        ],
                    }
                )
        elif kind == "zset":
            value = [(text(m), s) for m, s in await client.zrange(key, 0, -1, withscores=True)]
        elif kind == "string":
            value = await client.get(key)
        elif kind == "set":
            value = sorted(text(m) for m in await client.smembers(key))
        else:
            raise AssertionError(f"unexpected type {kind} for {key}")
        out[key] = {"type": kind, "ttl": ttl > 0, "value": value}
    return out
