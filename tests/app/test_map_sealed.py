"""Maps under ``SAGA_DATA_KEY``, with a real worker and a real server: the items' inputs
(the parent's list) and outputs, the fan-in and the per-item undos all arrive sealed in
Redis and open in the workers and readers; no value under the test's prefix holds the
marker in clear."""

from __future__ import annotations

import base64
import os
from pathlib import Path
from typing import Any

import msgspec
import pytest

from saga.config.settings import Settings, load_settings
from saga.state.keys import Keys
from tests.app.sealed_map_apps import SECRET, Note, notes
from tests.app.test_map import _all
from tests.executor.conftest import SpawnWorker
from tests.state.helpers import keys_under

pytestmark = pytest.mark.anyio
NOTES = "tests.app.sealed_map_apps:notes"
KEY = base64.b64encode(os.urandom(32)).decode()


@pytest.fixture
def sealed(settings: Settings, redis_url: str, keys: Keys, tmp_path: Path) -> Settings:
    """The test's settings with the data key the worker has."""
    env = {"REDIS_URL": redis_url, "SAGA_KEY_PREFIX": keys.prefix, "SAGA_DATA_KEY": KEY}
    return load_settings({**env, "SAGA_PARTITIONS": str(keys.partitions),
                          "SAGA_DATA_DIR": str(tmp_path / "data")})  # fmt: skip


async def _in_clear(redis: Any, prefix: str, marker: str = SECRET) -> list[str]:
    """Every key under ``prefix`` whose value (or a field, member or entry) holds ``marker``."""
    found = []
    for key in await keys_under(redis, prefix):
        kind = (await redis.type(key)).decode()
        if kind == "string":
            values = [await redis.get(key) or b""]
        elif kind == "hash":
            values = [k + b"=" + v for k, v in (await redis.hgetall(key)).items()]
        elif kind == "stream":
            values = [repr(f).encode() for _, f in await redis.xrange(key)]
        elif kind == "zset":
            values = await redis.zrange(key, 0, -1)
        else:
            values = []
        found += [key for v in values if marker.encode() in v]
    return found


async def test_a_map_runs_sealed_end_to_end(
    spawn: SpawnWorker, sealed: Settings, redis: Any, keys: Keys, tmp_path: Path
) -> None:
    """With a data key: the spawn counts the sealed list, each item gets its line, the
    partial fan-in is stored sealed and merge gets it in item order (the failed item
    marked); the saga's reader opens it; no Redis value holds the marker."""
    worker = spawn(NOTES, SAGA_DATA_KEY=KEY, TAG_FAILS="c ")
    await worker.wait_ready(within=120)
    async with notes.client(sealed) as sagas:
        await sagas.start("n1", "u1", input=Note(lines=["a", "b", "c", "d"]))
        await _all(redis, sagas.keys, ["n1"], "completed")
        saga = await sagas.get("n1")
        fanned = await redis.hget(sagas.keys.saga("n1"), "out:tag")
    assert fanned.startswith(b"\x00sgL") and SECRET.encode() not in fanned
    assert msgspec.json.decode(saga.outputs["merge"]) == {
        "texts": [f"tagged {x} {SECRET}" for x in "abd"], "failed": [2]}  # fmt: skip
    assert msgspec.json.decode(saga.outputs["tag"])["failed"] == [2]
    assert await _in_clear(redis, keys.prefix) == []
    await redis.hset(f"{keys.prefix}:probe", "f", SECRET)  # the scan would see one in clear
    assert await _in_clear(redis, keys.prefix) == [f"{keys.prefix}:probe"]


async def test_each_item_is_undone_with_its_sealed_input_and_output(
    spawn: SpawnWorker, sealed: Settings, redis: Any, keys: Keys, tmp_path: Path
) -> None:
    """merge fails for good: each committed item's undo opens the item's line and output
    (sealed in Redis) and runs under the item's key; nothing lands in Redis in clear."""
    log = tmp_path / "undo.log"
    worker = spawn(NOTES, SAGA_DATA_KEY=KEY, MERGE_FAILS="1", UNDO_LOG=str(log))
    await worker.wait_ready(within=120)
    async with notes.client(sealed) as sagas:
        await sagas.start("n2", "u1", input=Note(lines=["a", "b"]))
        await _all(redis, sagas.keys, ["n2"], "compensated")
    got = sorted(log.read_text().splitlines())
    assert got == [f"n2:tag:{i}:e1 {x} {SECRET} -> tagged {x} {SECRET}"
                   for i, x in enumerate("ab")]  # fmt: skip
    assert await _in_clear(redis, keys.prefix) == []
