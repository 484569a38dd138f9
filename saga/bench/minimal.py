"""Reference 2: the floor of this design ("minimal").

The same three streams, but per step a reader takes up to 50 messages with one
XREADGROUP (COUNT min(50, free slots)) and each message gets exactly one EVALSHA
of the script below — HSET the step's output, XADD the next step's message, XACK
the input — sent together in one pipeline per batch. No claim, no lease, no
fencing, no history, no indexes, no logging: what Python plus Redis can do at
best for one transition. At most ``concurrency`` messages per step are in
flight in a process, as in the engine.

Timestamps ride in the messages and the record hash: created, then per step the
batch read (its "claim") and the script sent (its "commit").

Run by ``saga bench``::

    python -m saga.bench.minimal --url URL --prefix P --concurrency C --stats F
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import signal
import socket
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from redis.exceptions import NoScriptError

from saga.bench.harness import reference_main, serve_until_stopped
from saga.bench.measure import Timing, stamp, stamps, timing_from_stamps
from saga.state.connection import connect
from saga.state.streams import create_group

STEPS = ("router", "parser", "grouper")
BATCH = 50
GROUP = "minimal"

SCRIPT = """
-- KEYS[1] record hash, KEYS[2] input stream, KEYS[3] next stream (KEYS[2] on the last step)
-- ARGV[1] group, ARGV[2] entry id, ARGV[3] output field, ARGV[4] stamps, ARGV[5] record id
redis.call('HSET', KEYS[1], ARGV[3], ARGV[4])
if KEYS[3] ~= KEYS[2] then
  redis.call('XADD', KEYS[3], '*', 'rid', ARGV[5], 'ts', ARGV[4])
end
redis.call('XACK', KEYS[2], ARGV[1], ARGV[2])
return 1
"""
SHA = hashlib.sha1(SCRIPT.encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class MinimalKeys:
    prefix: str

    def stream(self, step: str) -> str:
        return f"{self.prefix}:ready:{step}"

    def record(self, rid: str) -> str:
        return f"{self.prefix}:rec:{rid}"


# -- the driver's side ----------------------------------------------------------------
async def prepare(client: Any, keys: MinimalKeys) -> None:
    await client.script_load(SCRIPT)
    for step in STEPS:
        await create_group(client, keys.stream(step), GROUP)


async def submit(client: Any, keys: MinimalKeys, records: Sequence[tuple[str, str]]) -> None:
    pipe = client.pipeline(transaction=False)
    for rid, _uid in records:
        pipe.xadd(keys.stream(STEPS[0]), {"rid": rid, "ts": stamp()})
    await pipe.execute()


def streams(keys: MinimalKeys) -> list[tuple[str, str]]:
    return [(keys.stream(s), GROUP) for s in STEPS]


async def timings(client: Any, keys: MinimalKeys, rids: Sequence[str]) -> list[Timing]:
    out = []
    for i in range(0, len(rids), 1000):
        pipe = client.pipeline(transaction=False)
        for rid in rids[i : i + 1000]:
            pipe.hget(keys.record(rid), f"out:{STEPS[-1]}")
        for raw in await pipe.execute():
            if raw:
                out.append(timing_from_stamps(stamps(raw.decode()), len(STEPS)))
    return out


# -- the worker's side ------------------------------------------------------------------
class StepLoop:
    def __init__(
        self, client: Any, keys: MinimalKeys, step: str, consumer: str, concurrency: int
    ) -> None:
        i = STEPS.index(step)
        self.client, self.keys, self.step, self.consumer = client, keys, step, consumer
        self.stream = keys.stream(step)
        self.next = keys.stream(STEPS[i + 1]) if i + 1 < len(STEPS) else self.stream
        self.field = f"out:{step}"
        self.free = concurrency
        self.freed = asyncio.Event()
        self.batches: set[asyncio.Task[None]] = set()

    async def run(self, block_ms: int, stop: asyncio.Event) -> None:
        while not stop.is_set():
            while self.free <= 0:
                self.freed.clear()
                await self.freed.wait()
            n = min(BATCH, self.free)
            reply = await self.client.xreadgroup(
                GROUP, self.consumer, {self.stream: ">"}, count=n, block=block_ms
            )
            if not reply:
                continue
            entries = reply[0][1]
            claimed = stamp()
            self.free -= len(entries)
            task = asyncio.create_task(self.commit(entries, claimed))
            self.batches.add(task)
            task.add_done_callback(self.batches.discard)

    async def commit(self, entries: list[Any], claimed: str) -> None:
        try:
            calls = []
            for msg_id, fields in entries:
                rid = fields[b"rid"]
                ts = f"{fields[b'ts'].decode()},{claimed},{stamp()}"
                rec = self.keys.record(rid.decode())
                calls.append((rec, msg_id, ts, rid))
            await self._send(calls)
        finally:
            self.free += len(entries)
            self.freed.set()

    async def _send(self, calls: list[Any]) -> None:
        pipe = self.client.pipeline(transaction=False)
        for rec, msg_id, ts, rid in calls:
            pipe.evalsha(SHA, 3, rec, self.stream, self.next, GROUP, msg_id, self.field, ts, rid)
        results = await pipe.execute(raise_on_error=False)
        if any(isinstance(r, NoScriptError) for r in results):
            await self.client.script_load(SCRIPT)
            await self._send(calls)


async def serve(
    url: str, prefix: str, concurrency: int, block_ms: int, ready: Callable[[], None]
) -> None:
    client = connect(url)
    await client.ping()  # connected before the go, as the saga worker is
    ready()
    keys = MinimalKeys(prefix)
    consumer = f"{socket.gethostname()}-{os.getpid()}"
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    loops = [StepLoop(client, keys, step, consumer, concurrency) for step in STEPS]
    tasks = [asyncio.create_task(sl.run(block_ms, stop)) for sl in loops]
    try:
        await serve_until_stopped(tasks, stop)
        pending = [b for sl in loops for b in sl.batches]
        if pending:
            await asyncio.wait(pending, timeout=5.0)
    finally:
        await client.aclose()


def main(argv: Sequence[str] | None = None) -> int:
    return reference_main(
        "python -m saga.bench.minimal", serve, argv, "messages in flight per step"
    )


if __name__ == "__main__":
    sys.exit(main())
