"""Measurements shared by every system under test: per-saga timings, percentiles,
server counters (INFO commandstats, cpu, memory) and the machine it all ran on."""

from __future__ import annotations

import contextlib
import math
import os
import platform
import time
from collections.abc import Iterable, Sequence
from typing import Any

import anyio
import msgspec


class Timing(msgspec.Struct, frozen=True):
    """One finished saga: when it was created, and when each step was claimed and
    committed (epoch ms, fractional where the clock gives it)."""

    created_ms: float
    claimed_ms: tuple[float, ...]
    committed_ms: tuple[float, ...]

    @property
    def e2e_ms(self) -> float:
        return self.committed_ms[-1] - self.created_ms

    def handoffs_ms(self) -> list[float]:
        """Commit of step k to claim of step k+1."""
        return [
            self.claimed_ms[k + 1] - self.committed_ms[k] for k in range(len(self.claimed_ms) - 1)
        ]


class Pcts(msgspec.Struct, frozen=True):
    """Percentiles (nearest rank) of a sample, in milliseconds."""

    n: int
    p50: float
    p95: float
    p99: float
    max: float
    mean: float


def pcts(values: Iterable[float]) -> Pcts:
    xs = sorted(values)
    if not xs:
        return Pcts(0, 0.0, 0.0, 0.0, 0.0, 0.0)

    def rank(q: float) -> float:
        i = min(len(xs) - 1, max(0, math.ceil(q * len(xs)) - 1))
        return round(xs[i], 3)

    return Pcts(
        n=len(xs),
        p50=rank(0.50),
        p95=rank(0.95),
        p99=rank(0.99),
        max=round(xs[-1], 3),
        mean=round(sum(xs) / len(xs), 3),
    )


def stamps(text: str) -> list[float]:
    """Comma-separated ms stamps carried by the reference protocols' messages."""
    return [float(x) for x in text.split(",") if x]


def now_ms() -> float:
    return time.time() * 1000.0


def stamp() -> str:
    return f"{time.time() * 1000.0:.3f}"


def timing_from_stamps(values: Sequence[float], steps: int) -> Timing:
    """``t0, claim1, commit1, claim2, commit2, ...`` → Timing."""
    return Timing(
        created_ms=values[0],
        claimed_ms=tuple(values[1 + 2 * k] for k in range(steps)),
        committed_ms=tuple(values[2 + 2 * k] for k in range(steps)),
    )


# -- the server ----------------------------------------------------------------
def _field(d: Any, name: str) -> Any:
    if name in d:
        return d[name]
    return d.get(name.encode())


async def commandstats(client: Any) -> dict[str, int]:
    """Calls per command since the server started (or CONFIG RESETSTAT)."""
    return (await commandstats_with_usec(client))[0]


async def commandstats_with_usec(client: Any) -> tuple[dict[str, int], dict[str, int]]:
    """Calls and microseconds per command (one INFO): the microseconds of a script's
    EVALSHA include the commands it calls, which are also counted on their own."""
    info = await client.info("commandstats")
    calls: dict[str, int] = {}
    usec: dict[str, int] = {}
    for key, value in info.items():
        name = (key.decode() if isinstance(key, bytes) else str(key)).removeprefix("cmdstat_")
        calls[name] = int(_field(value, "calls") or 0)
        usec[name] = int(_field(value, "usec") or 0)
    return calls, usec


def delta(after: dict[str, int], before: dict[str, int]) -> dict[str, int]:
    d = {k: after.get(k, 0) - before.get(k, 0) for k in set(after) | set(before)}
    return {k: v for k, v in sorted(d.items()) if v}


async def server_cpu_s(client: Any) -> float:
    info = await client.info("cpu")
    return float(_field(info, "used_cpu_user") or 0) + float(_field(info, "used_cpu_sys") or 0)


async def used_memory(client: Any) -> int:
    return int(_field(await client.info("memory"), "used_memory") or 0)


async def settle_memory(client: Any, within_s: float = 10.0) -> int:
    """Wait until lazily freed objects are gone, then return used_memory."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        info = await client.info("memory")
        if not int(_field(info, "lazyfree_pending_objects") or 0):
            break
        await anyio.sleep(0.05)
    return await used_memory(client)


async def forks(client: Any) -> dict[str, int]:
    """Counters of the server's background saves (a fork stalls the server briefly)."""
    persistence = await client.info("persistence")
    stats = await client.info("stats")
    return {
        "aof_rewrites": int(_field(persistence, "aof_rewrites") or 0),
        "rdb_saves": int(_field(persistence, "rdb_saves") or 0),
        "total_forks": int(_field(stats, "total_forks") or 0),
        "latest_fork_usec": int(_field(stats, "latest_fork_usec") or 0),
    }


async def server_time_ms(client: Any) -> float:
    secs, micros = await client.time()
    return int(secs) * 1000.0 + int(micros) / 1000.0


class ServerInfo(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    version: str
    redis_version: str
    os: str
    transport: str
    appendonly: str
    maxmemory_policy: str
    allocator: str = "?"
    """The server's malloc: INFO mem_allocator, or what /proc shows of a local process
    (preloaded jemalloc, tuned glibc malloc: saga.adapters.server_allocator)."""


async def server_info(client: Any, url: str) -> ServerInfo:
    info = await client.info("server")
    persistence = await client.info("persistence")
    try:
        policy = await client.config_get("maxmemory-policy")
        mm = next(iter(policy.values()), b"")
    except Exception:  # CONFIG may be renamed or refused on managed servers
        mm = b"?"
    memory = await client.info("memory")
    allocator = str(_field(memory, "mem_allocator") or "?")
    local = url.startswith("unix") or "//127.0.0.1" in url or "//localhost" in url
    pid = int(_field(info, "process_id") or 0)
    if local and pid:
        from saga.adapters.server_allocator import describe_process

        allocator = describe_process(pid, allocator)
    name = str(_field(info, "server_name") or "redis")
    version = str(_field(info, "valkey_version") or _field(info, "redis_version") or "?")
    return ServerInfo(
        name=name,
        version=version,
        redis_version=str(_field(info, "redis_version") or "?"),
        os=str(_field(info, "os") or "?"),
        transport="unix socket" if url.startswith("unix") else "tcp",
        appendonly="yes" if int(_field(persistence, "aof_enabled") or 0) else "no",
        maxmemory_policy=mm.decode() if isinstance(mm, bytes) else str(mm),
        allocator=allocator,
    )


# -- the machine ------------------------------------------------------------------
class Machine(msgspec.Struct, frozen=True, kw_only=True):
    nproc: int
    cpu_model: str
    ram_bytes: int
    python: str
    platform: str


def machine() -> Machine:
    model = platform.processor() or "?"
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    ram = 0
    with contextlib.suppress(ValueError, OSError, AttributeError):
        ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return Machine(
        nproc=len(os.sched_getaffinity(0))
        if hasattr(os, "sched_getaffinity")
        else os.cpu_count() or 0,
        cpu_model=model,
        ram_bytes=ram,
        python=platform.python_version(),
        platform=platform.platform(),
    )


class CodeVersion(msgspec.Struct, frozen=True, kw_only=True):
    commit: str
    """HEAD of the checkout the bench ran from ("" outside a git checkout)."""
    dirty: list[str]
    """Uncommitted files of the engine (saga/, state/, steps/, adapters/) at the start."""


def code_version() -> CodeVersion:
    import subprocess
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    try:
        head = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short=12", "HEAD"],
            capture_output=True, text=True, check=True, timeout=10,
        ).stdout.strip()  # fmt: skip
        status = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--",
             "saga", "state", "steps", "adapters"],
            capture_output=True, text=True, check=True, timeout=10,
        ).stdout  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return CodeVersion(commit="", dirty=[])
    dirty = [line[3:] for line in status.splitlines() if line[3:] and "saga/bench" not in line]
    return CodeVersion(commit=head, dirty=dirty)
