"""A host crash, simulated: what a power loss leaves of the server's AOF.

Killing the server *process* loses nothing the kernel holds: under ``appendfsync
everysec`` Redis writes every command to the AOF before it replies, and the page cache
keeps it. A power loss keeps only what was fsynced. To cut exactly that, the server runs
with a small LD_PRELOAD shim (compiled here with the system C compiler) that, for every
``fdatasync``/``fsync`` of an ``.aof`` file that succeeds, records the file's size taken
*before* the call (all of it on disk once the call returns) and when. After SIGKILL the
AOF is truncated to the last size recorded: everything written since the last fsync is
gone, nothing fsynced is (a real power loss may keep more, never less)."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

SHIM_SOURCE = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static int logfd = -1;

__attribute__((constructor)) static void open_log(void) {
    const char *path = getenv("SAGA_FSYNC_LOG");
    if (path) logfd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
}

static void note(int fd, long long size, struct timespec mono, struct timespec wall) {
    char link[64], target[4096], line[4400];
    if (logfd < 0) return;
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, target, sizeof target - 1);
    if (n <= 0) return;
    target[n] = 0;
    if (n < 4 || strcmp(target + n - 4, ".aof") != 0) return;
    int len = snprintf(line, sizeof line, "%lld %lld.%09ld %lld.%09ld %s\n", size,
                       (long long)mono.tv_sec, mono.tv_nsec, (long long)wall.tv_sec,
                       wall.tv_nsec, target);
    if (write(logfd, line, len) < 0) return;  /* one O_APPEND write: lines never mix */
}

static int synced(const char *name, int fd) {
    int (*real)(int) = (int (*)(int))dlsym(RTLD_NEXT, name);
    struct stat st;
    struct timespec mono, wall;
    int have = fstat(fd, &st) == 0;
    clock_gettime(CLOCK_MONOTONIC, &mono);
    clock_gettime(CLOCK_REALTIME, &wall);
    int rc = real(fd);
    if (rc == 0 && have) note(fd, (long long)st.st_size, mono, wall);
    return rc;
}

int fdatasync(int fd) { return synced("fdatasync", fd); }
int fsync(int fd) { return synced("fsync", fd); }
"""


def build_shim(folder: Path) -> Path | None:
    """The shim as a shared object in ``folder``; None without a C compiler."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        return None
    src, lib = folder / "fsync_log.c", folder / "fsync_log.so"
    src.write_text(SHIM_SOURCE)
    subprocess.run([cc, "-shared", "-fPIC", "-O2", "-o", str(lib), str(src), "-ldl"], check=True)
    return lib


@contextlib.contextmanager
def preloaded(shim: Path, log: Path) -> Iterator[None]:
    """Processes started inside (the server) run with the shim, logging to ``log``."""
    saved = {k: os.environ.get(k) for k in ("LD_PRELOAD", "SAGA_FSYNC_LOG")}
    os.environ.update(LD_PRELOAD=str(shim), SAGA_FSYNC_LOG=str(log))
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@dataclass(frozen=True)
class Synced:
    """The last fsync of the AOF before the crash."""

    path: Path
    size: int
    """Bytes of the file on disk after it."""
    monotonic: float
    wall: float


def last_synced(log: Path) -> Synced:
    """The last fsync of an incremental AOF file (``*.incr.aof``) the shim recorded."""
    found = None
    for line in log.read_text().splitlines():
        size, mono, wall, path = line.split(" ", 3)
        if path.endswith(".incr.aof"):
            found = Synced(Path(path), int(size), float(mono), float(wall))
    assert found is not None, f"no fsync of an incremental AOF in {log}"
    return found


def cut_to_last_fsync(log: Path) -> tuple[Synced, int]:
    """What a power loss leaves: the AOF truncated to its last fsynced size (call after
    SIGKILL). Returns that fsync and the bytes cut."""
    synced = last_synced(log)
    cut = synced.path.stat().st_size - synced.size
    os.truncate(synced.path, synced.size)
    return synced, cut
