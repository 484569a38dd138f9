"""Reference 3: the seed's protocol as a team would batch it ("batched").

The same keys, markers and order of commands as ``seed_protocol``, but per batch
of up to ten messages and three round trips per batch::

    XREADGROUP ... COUNT 10 BLOCK ...                  read up to ten messages
    pipeline: per message SET lock NX EX 600, GET processed
    pipeline: per message whose lock was taken:
              SET processed EX 86400 (if no marker), XADD next (not on the last
              step; if no marker), XACK, DEL lock

A worker process runs ``ceil(concurrency / 10)`` such loops per step (so at most
about ``concurrency`` messages per step are in flight, as in the other systems),
on one redis-py asyncio client (hiredis) configured like saga's own. The step
itself does nothing. Timestamps ride in the messages and the last processed
marker, as in ``seed_protocol``.

Run by ``saga bench``::

    python -m saga.bench.seed_batched --url URL --prefix P --concurrency C --stats F
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable, Sequence
from typing import Any

import msgspec

from saga.bench.harness import reference_main
from saga.bench.measure import stamp
from saga.bench.seed_protocol import STEPS, Meta, SeedKeys, serve_steps

BATCH = 10


def loops_per_step(concurrency: int) -> int:
    """Batch loops per step: about ``concurrency`` messages in flight, at least one loop."""
    return max(1, -(-concurrency // BATCH))


async def step_loop(
    client: Any, keys: SeedKeys, step: str, consumer: str, block_ms: int, stop: asyncio.Event
) -> None:
    i = STEPS.index(step)
    nxt = keys.stream(STEPS[i + 1]) if i + 1 < len(STEPS) else ""
    stream, group = keys.stream(step), keys.group(step)
    while not stop.is_set():
        reply = await client.xreadgroup(group, consumer, {stream: ">"}, count=BATCH, block=block_ms)
        if not reply:
            continue
        entries = reply[0][1]
        rids = [fields[b"record_id"].decode() for _, fields in entries]
        check = client.pipeline(transaction=False)
        for rid in rids:
            check.set(keys.lock(step, rid), consumer, nx=True, ex=600)
            check.get(keys.processed(step, rid))
        answers = await check.execute()
        claimed = stamp()
        commit = client.pipeline(transaction=False)
        for k, (msg_id, fields) in enumerate(entries):
            locked, marker = answers[2 * k], answers[2 * k + 1]
            if not locked:
                continue  # another worker holds it; the seed leaves it to XAUTOCLAIM
            rid = rids[k]
            if marker is None:
                ts = f"{fields[b'ts'].decode()},{claimed},{stamp()}"
                commit.set(keys.processed(step, rid), msgspec.json.encode(Meta(rid, consumer, ts)),
                           ex=86400)  # fmt: skip
                if nxt:
                    commit.xadd(nxt, {"record_id": rid, "user_id": fields[b"user_id"], "ts": ts})
            commit.xack(stream, group, msg_id)
            commit.delete(keys.lock(step, rid))
        if len(commit):
            await commit.execute()


async def serve(
    url: str, prefix: str, concurrency: int, block_ms: int, ready: Callable[[], None]
) -> None:
    await serve_steps(url, prefix, loops_per_step(concurrency), block_ms, ready, step_loop)


def main(argv: Sequence[str] | None = None) -> int:
    return reference_main(
        "python -m saga.bench.seed_batched", serve, argv, "messages in flight per step"
    )


if __name__ == "__main__":
    sys.exit(main())
