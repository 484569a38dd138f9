"""Consumer names unique per process: host, pid and start time."""

from __future__ import annotations

import os
import socket
import time


def worker_name() -> str:
    host = socket.gethostname().split(".")[0][:40] or "host"
    return f"{host}-{os.getpid()}-{int(time.time() * 1000):x}"
