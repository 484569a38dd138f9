"""A poller that records every entry added to the ready streams, from a thread of its
own with a plain client, so double enqueues are counted outside saga's own bookkeeping.

It reads with XREAD (no consumer group: it takes nothing from the workers), survives
server outages by reconnecting, and can forget entries a restart lost (appendfsync
everysec keeps up to a second of writes only in memory).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import Counter
from typing import Any

import redis

from saga.state.keys import Keys


class ReadyPoller:
    def __init__(self, url: str, keys: Keys, steps: tuple[str, ...]) -> None:
        self.url, self.keys, self.steps = url, keys, steps
        self.seen: dict[str, tuple[str, str, int, float]] = {}
        """stream entry key ``stream|id`` -> (step, record, epoch, when seen)."""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="ready-poller", daemon=True)
        self._lock = threading.Lock()

    def start(self) -> ReadyPoller:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        streams = {self.keys.ready(p, s): s for s in self.steps for p in self.keys.all_partitions()}
        last = dict.fromkeys(streams, "0-0")
        client: Any = None
        while not self._stop.is_set():
            try:
                if client is None:
                    client = redis.Redis.from_url(self.url, socket_timeout=2)
                reply = client.xread(last, count=500, block=100)
            except (redis.ConnectionError, redis.TimeoutError, OSError):
                client = None
                time.sleep(0.05)
                continue
            for raw_stream, entries in reply or []:
                stream = raw_stream.decode()
                for raw_id, fields in entries:
                    entry = raw_id.decode()
                    last[stream] = entry
                    if b"rq" in fields:  # requeue_idle's replacement of an acked entry
                        continue
                    rid = fields.get(b"rid", b"").decode(errors="replace")
                    ep = fields.get(b"ep", b"0").decode(errors="replace")
                    with self._lock:
                        self.seen[f"{stream}|{entry}"] = (
                            streams[stream],
                            rid,
                            int(ep) if ep.isdigit() else -1,
                            time.monotonic(),
                        )
        if client is not None:
            with contextlib.suppress(Exception):
                client.close()

    def forget_lost(self, since: float) -> int:
        """After a restart: drop entries seen after ``since`` (monotonic) that the server
        no longer has; returns how many were lost with the unsynced writes."""
        client = redis.Redis.from_url(self.url, socket_timeout=5)
        try:
            with self._lock:
                recent = [k for k, v in self.seen.items() if v[3] >= since]
            lost = []
            for key in recent:
                stream, entry = key.split("|", 1)
                if not client.xrange(stream, entry, entry, count=1):
                    lost.append(key)
            with self._lock:
                for key in lost:
                    self.seen.pop(key, None)
            return len(lost)
        finally:
            client.close()

    def enqueues(self) -> Counter[tuple[str, str, int]]:
        """(step, record, epoch) -> entries seen."""
        with self._lock:
            return Counter((s, r, e) for s, r, e, _ in self.seen.values())
