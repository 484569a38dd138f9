"""The three systems under test, behind one face the driver runs the same way:
prepare, submit, count what finished, read per-saga timings, trim, and the
command line of one worker process."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from types import ModuleType
from typing import Any, Protocol

import anyio

from saga.bench import minimal, seed_protocol
from saga.bench.measure import Timing
from saga.bench.pipelines import PAGE_BYTES_ENV
from saga.state.keys import Keys
from saga.state.machine import StateMachine
from saga.state.model import EventType, SagaState
from saga.state.reads import parse_event
from saga.state.scripts import ensure_loaded
from saga.state.streams import ensure_groups, trim_behind_readers

STEPS = ("router", "parser", "grouper")
SUBMIT_TASKS = 32
"""Concurrent start calls of the saga submitter (each its own round trip)."""


class System(Protocol):
    name: str
    prefix: str

    def worker_argv(self, url: str, concurrency: int, stats: str) -> list[str]: ...
    def worker_env(self) -> dict[str, str]: ...
    async def prepare(self, client: Any) -> None: ...
    async def submit(self, client: Any, records: Sequence[tuple[str, str]]) -> None: ...
    async def completed(self, client: Any) -> tuple[int, dict[str, int]]:
        """How many sagas finished, and the commands this question cost the server."""
        ...

    async def timings(self, client: Any, rids: Sequence[str]) -> list[Timing]: ...
    async def trim(self, client: Any) -> None:
        """Drop acknowledged stream entries (what the engine's maintenance does)."""
        ...

    def clock_is_server(self) -> bool:
        """True if this system's timestamps come from the server's clock."""
        ...

    def record_keys(self, rid: str) -> dict[str, str]:
        """The keys one finished record keeps, by kind (for MEMORY USAGE)."""
        ...


async def memory_of(client: Any, keys: dict[str, str]) -> dict[str, int]:
    out = {}
    for kind, key in keys.items():
        out[kind] = int(await client.memory_usage(key, samples=0) or 0)
    return out


async def acked(client: Any, stream: str, group: str) -> tuple[int, dict[str, int]]:
    """Entries of ``stream`` the group has read and acknowledged (XINFO GROUPS)."""
    for g in await client.xinfo_groups(stream):
        name = g.get("name") or g.get(b"name")
        if (name.decode() if isinstance(name, bytes) else name) == group:
            read = g.get("entries-read") or g.get(b"entries-read") or 0
            pending = g.get("pending") or g.get(b"pending") or 0
            return int(read) - int(pending), {"xinfo|groups": 1}
    return 0, {"xinfo|groups": 1}


async def _trim_acked(client: Any, stream: str, group: str) -> None:
    for g in await client.xinfo_groups(stream):
        name = g.get("name") or g.get(b"name")
        if (name.decode() if isinstance(name, bytes) else name) != group:
            continue
        if int(g.get("pending") or g.get(b"pending") or 0):
            return
        last = g.get("last-delivered-id") or g.get(b"last-delivered-id")
        if last:
            await client.xtrim(stream, minid=last.decode() if isinstance(last, bytes) else last)


class SagaSystem:
    """The engine: ``saga worker router parser grouper`` with the no-op pipeline."""

    name = "saga"

    def __init__(
        self, prefix: str, partitions: int, env: dict[str, str], page_bytes: int = 0
    ) -> None:
        self.prefix = prefix
        self.keys = Keys(prefix=prefix, partitions=partitions)
        self._env = env
        self.page_bytes = page_bytes

    def worker_argv(self, url: str, concurrency: int, stats: str) -> list[str]:
        return [
            sys.executable, "-m", "saga.bench.harness", "--stats", stats, "--",
            "worker", *STEPS, "--concurrency", str(concurrency), "--health-port", "-1",
        ]  # fmt: skip

    def worker_env(self) -> dict[str, str]:
        return {
            "SAGA_PIPELINE": "saga.bench.pipelines:noop",
            "SAGA_KEY_PREFIX": self.prefix,
            "SAGA_PARTITIONS": str(self.keys.partitions),
            **({PAGE_BYTES_ENV: str(self.page_bytes)} if self.page_bytes else {}),
            **self._env,
        }

    async def prepare(self, client: Any) -> None:
        await ensure_loaded(client)
        await ensure_groups(client, self.keys, STEPS)

    async def submit(self, client: Any, records: Sequence[tuple[str, str]]) -> None:
        sm = StateMachine(client, self.keys)
        it = iter(records)

        async def feeder() -> None:
            for rid, uid in it:
                await sm.start(rid, uid, STEPS[0])

        async with anyio.create_task_group() as tg:
            for _ in range(min(SUBMIT_TASKS, len(records))):
                tg.start_soon(feeder)

    async def completed(self, client: Any) -> tuple[int, dict[str, int]]:
        pipe = client.pipeline(transaction=False)
        for p in self.keys.all_partitions():
            pipe.zcard(self.keys.state_index(p, SagaState.COMPLETED))
        counts = await pipe.execute()
        return sum(int(c) for c in counts), {"zcard": len(counts)}

    async def timings(self, client: Any, rids: Sequence[str]) -> list[Timing]:
        out = []
        for i in range(0, len(rids), 1000):
            pipe = client.pipeline(transaction=False)
            for rid in rids[i : i + 1000]:
                pipe.xrange(self.keys.history(rid))
            for rows in await pipe.execute():
                t = saga_timing([parse_event(eid, f) for eid, f in rows])
                if t is not None:
                    out.append(t)
        return out

    async def trim(self, client: Any) -> None:
        for step in STEPS:
            for p in self.keys.all_partitions():
                await trim_behind_readers(client, self.keys, step, p)

    def clock_is_server(self) -> bool:
        return True

    def record_keys(self, rid: str) -> dict[str, str]:
        keys = {"saga hash": self.keys.saga(rid), "history stream": self.keys.history(rid)}
        if self.page_bytes:  # deleted by the parser's commit: 0 B once the saga is done
            keys["pages"] = self.keys.pages(rid)
        return keys


def saga_timing(events: Sequence[Any]) -> Timing | None:
    """From a saga's history: started, and per step when its committed attempt was
    claimed (the commit's time less its duration, both from the server's clock)."""
    created = 0.0
    claims: list[float] = []
    commits: list[float] = []
    for ev in events:
        if ev.event == EventType.STARTED:
            created = float(ev.at_ms)
        elif ev.event == EventType.COMMITTED:
            claims.append(float(ev.at_ms - ev.duration_ms))
            commits.append(float(ev.at_ms))
    if not created or len(commits) != len(STEPS):
        return None
    return Timing(created, tuple(claims), tuple(commits))


class _Reference:
    """A reference system run by its own module (``proto``): every part of the face but
    the keys one record keeps calls that module's driver side."""

    name: str
    module: str
    """What ``python -m`` runs as one worker process."""
    proto: ModuleType
    """Its driver side: ``prepare``, ``submit``, ``streams``, ``timings``."""
    keys: Any

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix

    def worker_argv(self, url: str, concurrency: int, stats: str) -> list[str]:
        return [
            sys.executable, "-m", self.module, "--url", url,
            "--prefix", self.prefix, "--concurrency", str(concurrency), "--stats", stats,
        ]  # fmt: skip

    def worker_env(self) -> dict[str, str]:
        return {}

    async def prepare(self, client: Any) -> None:
        await self.proto.prepare(client, self.keys)

    async def submit(self, client: Any, records: Sequence[tuple[str, str]]) -> None:
        for i in range(0, len(records), 1000):
            await self.proto.submit(client, self.keys, records[i : i + 1000])

    async def completed(self, client: Any) -> tuple[int, dict[str, int]]:
        return await acked(client, *self.proto.streams(self.keys)[-1])  # the last step's

    async def timings(self, client: Any, rids: Sequence[str]) -> list[Timing]:
        timings: list[Timing] = await self.proto.timings(client, self.keys, rids)
        return timings

    async def trim(self, client: Any) -> None:
        for stream, group in self.proto.streams(self.keys):
            await _trim_acked(client, stream, group)

    def clock_is_server(self) -> bool:
        return False


class SeedSystem(_Reference):
    """The seed's protocol: as written (``seed_protocol``), or batched x10 and
    pipelined (``seed_batched``, name "batched"); the same keys and markers."""

    name = "seed"
    module = "saga.bench.seed_protocol"
    proto = seed_protocol

    def __init__(self, prefix: str) -> None:
        super().__init__(prefix)
        self.keys = seed_protocol.SeedKeys(prefix)

    def record_keys(self, rid: str) -> dict[str, str]:
        return {f"processed:{s}": self.keys.processed(s, rid) for s in STEPS}


class BatchedSeedSystem(SeedSystem):
    name = "batched"
    module = "saga.bench.seed_batched"


class MinimalSystem(_Reference):
    name = "minimal"
    module = "saga.bench.minimal"
    proto = minimal

    def __init__(self, prefix: str) -> None:
        super().__init__(prefix)
        self.keys = minimal.MinimalKeys(prefix)

    def record_keys(self, rid: str) -> dict[str, str]:
        return {"record hash": self.keys.record(rid)}
