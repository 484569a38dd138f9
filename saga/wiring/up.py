"""Supervise one worker process per step (``saga up``), logs prefixed and interleaved."""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import sys
import time
from typing import NamedTuple


class Unit(NamedTuple):
    """One worker process to run: its log label, the app (``module:attr``, "" for this
    deployment's pipeline) and the step it serves."""

    label: str
    app: str
    step: str


def run_up(
    units: list[Unit], per_step: int, redis_url: str, extra: dict[str, list[str]] | None = None
) -> int:
    """Run until Ctrl-C/SIGTERM, then SIGTERM every worker and wait for their drain.
    ``extra``: more ``saga`` commands to supervise the same way, by name (the console)."""
    env = dict(
        os.environ,
        REDIS_URL=redis_url,
        SAGA_LOG_FORMAT=os.environ.get("SAGA_LOG_FORMAT", "console"),
    )
    procs: dict[str, subprocess.Popen[bytes]] = {}
    for unit in units:
        for i in range(per_step):
            name = f"{unit.label}-{i + 1}"
            penv = dict(env, SAGA_HEALTH_PORT=str(0))
            target = [unit.app, unit.step] if unit.app else [unit.step]
            procs[name] = subprocess.Popen(
                [sys.executable, "-m", "saga.cli.main", "worker", *target],
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                env=penv,
            )
    for name, argv in (extra or {}).items():
        procs[name] = subprocess.Popen(
            [sys.executable, "-m", "saga.cli.main", *argv],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=env,
        )
    stopping = False

    def stop(*_: object) -> None:
        nonlocal stopping
        if not stopping:
            stopping = True
            print("saga up: stopping workers (draining in-flight steps)", file=sys.stderr)
            for p in procs.values():
                if p.poll() is None:
                    p.send_signal(signal.SIGTERM)

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    width = max(len(n) for n in procs)
    sel = selectors.DefaultSelector()
    for name, p in procs.items():
        assert p.stdout is not None
        sel.register(p.stdout, selectors.EVENT_READ, name)
    while sel.get_map():
        for key, _ in sel.select(timeout=0.5):
            line = key.fileobj.readline()  # type: ignore[union-attr]
            if not line:
                sel.unregister(key.fileobj)
                continue
            sys.stdout.write(f"{key.data:<{width}} | {line.decode(errors='replace')}")
            sys.stdout.flush()
        if not stopping and any(p.poll() is not None for p in procs.values()):
            stop()
    deadline = time.monotonic() + 60
    for p in procs.values():
        p.wait(timeout=max(deadline - time.monotonic(), 0.1))
    return max((p.returncode or 0) for p in procs.values())
