"""The retention sweep's archive (``SAGA_ARCHIVE_DIR``): each batch of sagas due for
deletion is written there, in ``saga export``'s line format, and made durable (fsync)
before the sweep deletes them. A failed write (a full disk, a missing volume) raises, so
nothing is deleted that was not archived; the sweep tries again next minute.

One file per saga type, UTC day and process (``<type>-<yyyy-mm-dd>-<host>-<pid>.jsonl``):
sweepers on several pods never interleave lines. Two sweepers racing over the same batch
may both archive a saga (the script deletes it once): ``saga import`` of the files takes
the first line of a record and counts the others as already there.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio

from saga.state.archive import encode_line, read_sagas
from saga.state.keys import Keys


class Archiver:
    """``before_delete`` of ``retention.prune_retired``: archives the records first."""

    def __init__(self, client: Any, keys: Keys, directory: str | Path) -> None:
        self.client, self.keys, self.directory = client, keys, Path(directory)
        self.tag = f"{socket.gethostname()}-{os.getpid()}"
        self.archived = 0

    def path(self, now_s: float | None = None) -> Path:
        day = time.strftime("%Y-%m-%d", time.gmtime(time.time() if now_s is None else now_s))
        return self.directory / f"{self.keys.saga_type}-{day}-{self.tag}.jsonl"

    async def __call__(self, partition: int, records: Sequence[str]) -> None:
        # Sealed values stay sealed: the archive is at rest too.
        docs = await read_sagas(self.client, self.keys, records)
        lines = [encode_line(doc) for doc in docs if doc is not None]
        if lines:
            await anyio.to_thread.run_sync(self._append, b"".join(lines))
            self.archived += len(lines)

    def _append(self, data: bytes) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path(), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            while data:
                data = data[os.write(fd, data) :]
            os.fsync(fd)  # durable before the sweep deletes what it holds
        finally:
            os.close(fd)
