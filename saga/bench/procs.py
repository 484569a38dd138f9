"""Worker processes of one measured phase: start, hold at the barrier, go, stop, collect."""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

import anyio
import msgspec

from saga.bench.harness import Usage


class WorkerError(RuntimeError):
    """A bench worker process failed to start or died."""


class WorkerSet:
    def __init__(
        self, argvs: Sequence[list[str]], env: dict[str, str], log_dir: Path, label: str
    ) -> None:
        self.argvs = list(argvs)
        self.env = env
        self.log_dir = log_dir
        self.label = label
        self.procs: list[subprocess.Popen[bytes]] = []
        self.logs: list[Path] = []
        self.stats: list[Path] = []
        self._log_files: list[IO[bytes]] = []

    @staticmethod
    def stats_path(log_dir: Path, label: str, i: int) -> Path:
        return log_dir / f"{label}-{i}.stats.json"

    def spawn(self) -> None:
        """Start every process (each imports its code, then waits at the barrier)."""
        for i, argv in enumerate(self.argvs):
            log = self.log_dir / f"{self.label}-{i}.log"
            f = log.open("wb")
            self._log_files.append(f)
            self.logs.append(log)
            self.stats.append(self.stats_path(self.log_dir, self.label, i))
            self.procs.append(
                subprocess.Popen(
                    argv,
                    env=self.env,
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=f,
                )
            )

    async def start(self, limit_s: float = 120.0) -> None:
        """Spawn every process and wait until each has imported and says ready."""
        await anyio.to_thread.run_sync(self.spawn)
        with anyio.fail_after(limit_s):
            for i, proc in enumerate(self.procs):
                assert proc.stdout is not None
                line = await anyio.to_thread.run_sync(proc.stdout.readline)
                if line.strip() != b"ready":
                    raise WorkerError(f"{self.label} worker {i} did not start: {self.tail(i)}")

    def go(self) -> None:
        for proc in self.procs:
            assert proc.stdin is not None
            proc.stdin.write(b"go\n")
            proc.stdin.flush()

    def check(self) -> None:
        for i, proc in enumerate(self.procs):
            if proc.poll() is not None:
                raise WorkerError(
                    f"{self.label} worker {i} exited with {proc.returncode}: {self.tail(i)}"
                )

    def tail(self, i: int, n: int = 1500) -> str:
        with contextlib.suppress(OSError):
            data = self.logs[i].read_bytes()[-n:].decode(errors="replace").strip()
            return data or "(no output)"
        return "(no log)"

    def kill(self, i: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.procs[i].pid, signal.SIGKILL)
        self.procs[i].wait()

    async def stop(self, limit_s: float = 30.0) -> list[Usage]:
        """SIGTERM every process (each drains and writes its report), then read them."""
        for proc in self.procs:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + limit_s
        for proc in self.procs:
            wait = functools.partial(_wait, proc, max(0.0, deadline - time.monotonic()))
            await anyio.to_thread.run_sync(wait)
        self.terminate()
        usages = []
        for path in self.stats:
            with contextlib.suppress(OSError, msgspec.DecodeError):
                usages.append(msgspec.json.decode(path.read_bytes(), type=Usage))
        return usages

    def terminate(self) -> None:
        """Kill whatever still runs and close the pipes (safe to call twice)."""
        for proc in self.procs:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                proc.wait()
            for pipe in (proc.stdin, proc.stdout):
                if pipe is not None:
                    with contextlib.suppress(OSError):
                        pipe.close()
        for f in self._log_files:
            f.close()
        self._log_files = []

    def __enter__(self) -> WorkerSet:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.terminate()


def _wait(proc: subprocess.Popen[bytes], limit_s: float) -> None:
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(limit_s)
