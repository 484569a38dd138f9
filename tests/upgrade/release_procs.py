"""``python -m saga.cli.main <command>`` of a release: the previous one from its own venv
(``release_venv``), or this checkout's (``release`` None), as the Worker handle the fault
and controller tests use (pid, health port, log, signals)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.executor.support import REPO, Worker, free_port
from tests.upgrade.release_venv import Release


def start(release: Release | None, command: list[str], env: dict[str, str], log: Path) -> Worker:
    """Start ``saga <command>`` of ``release`` on a free health port of its own."""
    port = free_port()
    home = release.path if release is not None else REPO
    python = str(release.python) if release is not None else sys.executable
    full = {**env, "PYTHONPATH": str(home), "SAGA_HEALTH_PORT": str(port)}
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [python, "-m", "saga.cli.main", *command],
            cwd=home,
            env=full,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
        )
    return Worker(proc, port, log, command[1:])
