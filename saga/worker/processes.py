"""``saga worker --processes N``: N event loops in one pod, sharing nothing but Redis.

One asyncio loop keeps about one core busy; a pod with more cores forks N copies of
the worker after the imports (shared copy-on-write), before any event loop, client
or thread exists. Each child is a whole worker: its own Redis client, consumer name
(so ``saga top`` and presence show each), health server and drain.

The parent only supervises:

* SIGTERM / SIGINT are passed to every child; each drains its own in-flight steps
  (``SAGA_DRAIN_SECONDS``) and exits; the parent exits once all have.
* A child that exits on its own (a crash, a bad setting) stops the others the same
  way, and the parent exits with that child's code: the pod restarts as a whole,
  visibly, instead of running with fewer loops than it was sized for.

Health ports: child i serves on the configured port + i (8080, 8081, ... by default;
``0`` gives each a free port, ``-1`` none), so the pod's probes on the first port
watch child 0, and each child's ``/metrics`` can be scraped on its own port.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import sys
import traceback
from collections.abc import Callable
from types import FrameType

import structlog

log = structlog.get_logger("saga.worker")

_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def run_processes(n: int, child: Callable[[int], int]) -> int:
    """Fork ``n`` children running ``child(index)`` (its return value is its exit
    code), pass stop signals on, and return the first non-zero exit code (0 if all
    drained cleanly)."""
    children: dict[int, int] = {}
    stopping = False

    def stop_all(signum: int, _frame: FrameType | None = None) -> None:
        nonlocal stopping
        stopping = True
        for pid in children:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signum)

    previous = {sig: signal.signal(sig, stop_all) for sig in _STOP_SIGNALS}
    try:
        for index in range(n):
            if stopping:
                break
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:  # the child never returns from here
                _child(index, child)
            children[pid] = index
        log.info("worker_processes_started", processes=len(children), pids=sorted(children))
        code = 0
        while children:
            pid, status = os.wait()  # retried after a signal's handler (PEP 475)
            index = children.pop(pid, -1)
            exited = os.waitstatus_to_exitcode(status)
            exited = exited if exited >= 0 else 128 - exited  # killed by a signal: 128 + n
            if exited and not code:
                code = exited
            if not stopping:
                log.error(
                    "worker_process_exited",
                    index=index,
                    pid=pid,
                    code=exited,
                    detail="stopping the other worker processes; the pod restarts as a whole",
                )
                stop_all(signal.SIGTERM)
        return code
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _child(index: int, child: Callable[[int], int]) -> None:
    """Run one worker in a forked child and exit with its code (never returns)."""
    code = 1
    try:
        for sig in _STOP_SIGNALS:  # the worker installs its own (drain) once its loop runs
            signal.signal(
                sig, signal.SIG_DFL if sig == signal.SIGTERM else signal.default_int_handler
            )
        code = child(index)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:
        traceback.print_exc()
    finally:
        try:
            atexit._run_exitfuncs()  # buffered log lines (saga.wiring.log_output), as at exit
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)
