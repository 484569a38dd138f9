"""Backups of a running server, the way ``docs/operations.md`` (Data lifecycle) tells
operators to take them, used by the restore drill (tests/lifecycle/test_restore_drill.py).

- ``backup_aof``: the embedded server keeps an append-only file and no snapshots. A
  rewrite (BGREWRITEAOF) is waited for, then ``appendonlydir`` (manifest, base, increment)
  is copied: a new server started on a data dir holding the copy loads it. An RDB file is
  *not* enough there: a server started with ``appendonly yes`` and no AOF starts empty.
- ``backup_rdb``: a snapshot (BGSAVE), waited for, copied: an external Redis restores it
  with ``appendonly no`` (then ``CONFIG SET appendonly yes`` writes a new AOF from it).
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

import anyio


async def _until(client: Any, done: Any, within: float, what: str) -> None:
    deadline = time.monotonic() + within
    while not done(await client.info("persistence")):
        if time.monotonic() > deadline:
            raise TimeoutError(f"the server's {what} did not finish within {within:.0f} s")
        await anyio.sleep(0.05)


async def backup_aof(client: Any, data_dir: Path, dest: Path, within: float = 60.0) -> Path:
    """Rewrite the AOF, then copy ``data_dir/appendonlydir`` to ``dest/appendonlydir``."""
    await client.bgrewriteaof()
    await _until(
        client,
        lambda i: not i["aof_rewrite_in_progress"] and not i["aof_rewrite_scheduled"],
        within,
        "AOF rewrite",
    )
    target = dest / "appendonlydir"
    await anyio.to_thread.run_sync(lambda: shutil.copytree(data_dir / "appendonlydir", target))
    return target


async def backup_rdb(client: Any, data_dir: Path, dest: Path, within: float = 60.0) -> Path:
    """Take a snapshot (BGSAVE) and copy ``dump.rdb`` to ``dest``."""
    before = await client.lastsave()
    await client.bgsave(schedule=True)  # after a rewrite under way, not refused
    await _until(client, lambda i: not i["rdb_bgsave_in_progress"], within, "BGSAVE")
    if (
        await client.lastsave() == before
        and (await client.info("persistence"))["rdb_last_bgsave_status"] != "ok"
    ):
        raise RuntimeError("BGSAVE failed: see the server's log")
    target = dest / "dump.rdb"

    def copy() -> None:
        dest.mkdir(parents=True, exist_ok=True)
        shutil.copy2(data_dir / "dump.rdb", target)

    await anyio.to_thread.run_sync(copy)
    return target
