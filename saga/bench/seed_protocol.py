"""Reference 1: the seed's protocol (phoenix-pipeline, "Complete Message Lifecycle").

Per message, each its own round trip, in this order::

    XREADGROUP ... COUNT 1 BLOCK ...        read one message
    SET lock:<step>:<rid> <consumer> NX EX 600
    GET processed:<step>:<rid>              idempotency marker
    SET processed:<step>:<rid> <meta> EX 86400
    XADD <next step's stream> * ...         (not on the last step)
    XACK <stream> <group> <id>
    DEL lock:<step>:<rid>

A worker process runs ``concurrency`` asyncio tasks per step, each looping over
that sequence, on one redis-py asyncio client (hiredis parser) configured like
saga's own. The step itself does nothing. Timestamps ride in the messages and the
last processed marker: created, then per step the lock taken (its "claim") and
the marker written (its "commit").

Run by ``saga bench``::

    python -m saga.bench.seed_protocol --url URL --prefix P --concurrency C --stats F
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import sys
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec

from saga.bench.harness import reference_main, serve_until_stopped
from saga.bench.measure import Timing, stamp, stamps, timing_from_stamps
from saga.state.connection import connect
from saga.state.streams import create_group

STEPS = ("router", "parser", "grouper")


class Meta(msgspec.Struct, frozen=True):
    """The processed marker's {metadata}: who processed it, and the stamps so far."""

    record_id: str
    consumer: str
    ts: str


@dataclass(frozen=True, slots=True)
class SeedKeys:
    prefix: str

    def stream(self, step: str) -> str:
        return f"{self.prefix}:phoenix:{step}:input"

    @staticmethod
    def group(step: str) -> str:
        return f"{step}-group"

    def lock(self, step: str, rid: str) -> str:
        return f"{self.prefix}:lock:{step}:{rid}"

    def processed(self, step: str, rid: str) -> str:
        return f"{self.prefix}:processed:{step}:{rid}"


# -- the driver's side ----------------------------------------------------------------
async def prepare(client: Any, keys: SeedKeys) -> None:
    for step in STEPS:
        await create_group(client, keys.stream(step), keys.group(step))


async def submit(client: Any, keys: SeedKeys, records: Sequence[tuple[str, str]]) -> None:
    """The API backend's XADD, one per record, sent as one pipeline."""
    pipe = client.pipeline(transaction=False)
    for rid, uid in records:
        pipe.xadd(keys.stream(STEPS[0]), {"record_id": rid, "user_id": uid, "ts": stamp()})
    await pipe.execute()


def streams(keys: SeedKeys) -> list[tuple[str, str]]:
    return [(keys.stream(s), keys.group(s)) for s in STEPS]


async def timings(client: Any, keys: SeedKeys, rids: Sequence[str]) -> list[Timing]:
    out = []
    for i in range(0, len(rids), 1000):
        pipe = client.pipeline(transaction=False)
        for rid in rids[i : i + 1000]:
            pipe.get(keys.processed(STEPS[-1], rid))
        for raw in await pipe.execute():
            if raw:
                meta = msgspec.json.decode(raw, type=Meta)
                out.append(timing_from_stamps(stamps(meta.ts), len(STEPS)))
    return out


# -- the worker's side ------------------------------------------------------------------
async def step_task(
    client: Any, keys: SeedKeys, step: str, consumer: str, block_ms: int, stop: asyncio.Event
) -> None:
    i = STEPS.index(step)
    nxt = STEPS[i + 1] if i + 1 < len(STEPS) else ""
    stream, group = keys.stream(step), keys.group(step)
    while not stop.is_set():
        reply = await client.xreadgroup(group, consumer, {stream: ">"}, count=1, block=block_ms)
        if not reply:
            continue
        msg_id, fields = reply[0][1][0]
        rid = fields[b"record_id"].decode()
        lock = keys.lock(step, rid)
        if not await client.set(lock, consumer, nx=True, ex=600):
            continue  # another worker holds it; the seed leaves it to XAUTOCLAIM
        claimed = stamp()
        processed = keys.processed(step, rid)
        if await client.get(processed) is None:
            ts = f"{fields[b'ts'].decode()},{claimed},{stamp()}"
            meta = msgspec.json.encode(Meta(rid, consumer, ts))
            await client.set(processed, meta, ex=86400)
            if nxt:
                fwd = {"record_id": rid, "user_id": fields[b"user_id"], "ts": ts}
                await client.xadd(keys.stream(nxt), fwd)
        await client.xack(stream, group, msg_id)
        await client.delete(lock)


async def serve(
    url: str, prefix: str, concurrency: int, block_ms: int, ready: Callable[[], None]
) -> None:
    await serve_steps(url, prefix, concurrency, block_ms, ready, step_task)


StepLoop = Callable[[Any, "SeedKeys", str, str, int, asyncio.Event], Coroutine[Any, Any, None]]


async def serve_steps(
    url: str,
    prefix: str,
    per_step: int,
    block_ms: int,
    ready: Callable[[], None],
    run_step: StepLoop,
) -> None:
    """``per_step`` copies of ``run_step`` per step until SIGTERM/SIGINT (both references)."""
    # Every task holds a connection while it blocks in XREADGROUP.
    client = connect(url, max_connections=per_step * len(STEPS) + 16)
    await client.ping()  # connected before the go, as the saga worker is
    ready()
    keys = SeedKeys(prefix)
    consumer = f"{socket.gethostname()}-{os.getpid()}"
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    tasks = [
        asyncio.create_task(run_step(client, keys, step, consumer, block_ms, stop))
        for step in STEPS
        for _ in range(per_step)
    ]
    try:
        await serve_until_stopped(tasks, stop)
    finally:
        await client.aclose()


def main(argv: Sequence[str] | None = None) -> int:
    return reference_main("python -m saga.bench.seed_protocol", serve, argv, "tasks per step")


if __name__ == "__main__":
    sys.exit(main())
