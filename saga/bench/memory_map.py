"""Where a run's bytes are: MEMORY USAGE of its keys, by kind of key.

A kind is the part of the key after the partition tag (``saga``, ``hist``,
``ready``, ``idx:created`` ...), or after the prefix for the references' keys
(``processed``, ``rec`` ...). Keys of a per-record kind are many (one or two per
saga): a sample of them is measured and scaled by their count; every other key
(streams, indexes, counters) is measured. ``used_memory`` less the sum is the
keyspace's own overhead (its dict entries, expiry entries) and the allocator's.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

PER_RECORD = frozenset({"saga", "hist", "pages", "processed", "lock", "rec"})
SAMPLE = 300


def kind_of(key: str, prefix: str) -> str:
    rest = key.split("}:", 1)[1] if "}:" in key else key[len(prefix) :].lstrip(":")
    parts = rest.split(":")
    return ":".join(parts[:2]) if parts[0] == "idx" else parts[0]


async def memory_by_kind(client: Any, prefix: str, sample: int = SAMPLE) -> dict[str, int]:
    """Bytes under ``prefix`` by kind of key (per-record kinds estimated from a sample)."""
    keys: dict[str, list[Any]] = defaultdict(list)
    cursor: Any = 0
    while True:
        cursor, found = await client.scan(cursor, match=f"{prefix}*", count=1000)
        for raw in found:
            key = raw.decode() if isinstance(raw, bytes) else str(raw)
            keys[kind_of(key, prefix)].append(raw)
        if int(cursor) == 0:
            break
    out: dict[str, int] = {}
    for kind, names in sorted(keys.items()):
        measured = names[:: max(1, len(names) // sample)] if kind in PER_RECORD else names
        total = 0
        for i in range(0, len(measured), 1000):
            pipe = client.pipeline(transaction=False)
            for name in measured[i : i + 1000]:
                pipe.memory_usage(name, samples=0)
            total += sum(int(v or 0) for v in await pipe.execute())
        out[kind] = round(total * len(names) / len(measured)) if measured else 0
    return out
