"""The retention sweep archives before it deletes (``SAGA_ARCHIVE_DIR``): what it deleted is
in the archive, durable, in ``saga export``'s format; an archive that cannot be written
deletes nothing; a ``saga controller`` with no executor running archives and deletes, and
``saga import`` puts the archived sagas back."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from saga.lifecycle.archiver import Archiver
from saga.state.keys import Keys
from saga.state.limits import Retention, StateLimits
from saga.state.machine import StateMachine
from saga.state.retention import prune_retired
from tests.cli.inspect_support import cli, machine, run_to_dead
from tests.controller.support import Procs
from tests.executor.support import wait_until
from tests.state.helpers import server_ms, stream_rows

pytestmark = pytest.mark.anyio


async def events_of(redis: Any, keys: Keys, record: str) -> list[Any]:
    """A history's entries with each event's names and values (either stored shape)."""
    return await stream_rows(redis, keys.history(record))


async def failed_and_due(redis: Any, keys: Keys, records: list[str]) -> StateMachine:
    """Sagas dead-lettered under a zero retention for failed ones: due at once."""
    await machine(redis, keys)
    sm = StateMachine(redis, keys, StateLimits(retention=Retention(failed_s=0)))
    for record in records:
        await run_to_dead(sm, record, "parser")
    due = max([int(await redis.hget(keys.saga(r), "ret")) for r in records])

    async def past() -> bool:
        return await server_ms(redis) > due

    await wait_until(past, within=10, what="the retention's end")
    return sm


async def test_the_sweep_archives_each_saga_before_deleting_it(
    redis: Any, keys: Keys, tmp_path: Path
) -> None:
    """Every deleted saga is a line of the archive, its history whole; a second sweep
    finds nothing and writes nothing."""
    records = [f"r-{i}" for i in range(5)]
    sm = await failed_and_due(redis, keys, records)
    histories = {r: len(await redis.xrange(keys.history(r))) for r in records}
    archiver = Archiver(redis, keys, tmp_path / "archive")
    assert await prune_retired(sm, 0, before_delete=archiver) == 5
    assert await redis.exists(*(keys.saga(r) for r in records)) == 0
    files = list((tmp_path / "archive").iterdir())
    assert [f.name for f in files] == [archiver.path().name]
    lines = [json.loads(x) for x in files[0].read_text().splitlines()]
    assert {d["record_id"]: len(d["history"]) for d in lines} == histories
    assert {d["state"] for d in lines} == {"failed"}
    assert oct(files[0].stat().st_mode & 0o777) == "0o600"
    assert await prune_retired(sm, 0, before_delete=archiver) == 0
    assert len(files[0].read_text().splitlines()) == 5


async def test_an_archive_that_cannot_be_written_deletes_nothing(
    redis: Any, keys: Keys, tmp_path: Path
) -> None:
    """SAGA_ARCHIVE_DIR names a file, not a directory: the sweep raises, every saga stays."""
    records = ["r-a", "r-b"]
    sm = await failed_and_due(redis, keys, records)
    blocked = tmp_path / "not-a-dir"
    blocked.write_text("")
    with pytest.raises(OSError):
        await prune_retired(sm, 0, before_delete=Archiver(redis, keys, blocked))
    assert await redis.exists(*(keys.saga(r) for r in records)) == 2
    assert await redis.zcard(keys.retired(0)) == 2


async def test_the_controller_archives_and_deletes_with_no_executor_running(
    redis: Any,
    keys: Keys,
    redis_url: str,
    base_env: dict[str, str],
    procs: Procs,
    tmp_path: Path,
) -> None:
    """Executors at zero: the controller's maintenance archives the due sagas, deletes
    them, and the archive imports back into an empty prefix with their histories."""
    records = [f"gone-{i}" for i in range(4)]
    await failed_and_due(redis, keys, records)
    before = {r: await events_of(redis, keys, r) for r in records}
    archive = tmp_path / "archive"
    env = {**base_env, "SAGA_ARCHIVE_DIR": str(archive), "SAGA_RETENTION_DAYS": "failed=0"}
    controller = procs.controller(env)

    async def swept() -> bool:
        return await redis.exists(*(keys.saga(r) for r in records)) == 0

    await wait_until(swept, within=60, what="the controller's sweep", on_timeout=procs.tails)
    lines = [x for f in archive.iterdir() for x in f.read_text().splitlines()]
    assert sorted(json.loads(x)["record_id"] for x in lines) == records
    controller.kill()

    other = Keys(prefix=f"t{uuid.uuid4().hex[:10]}", partitions=1)
    for f in archive.iterdir():
        res = cli(other, redis_url, "import", str(f))
        assert res.returncode == 0, res.stderr
    for r in records:
        assert await redis.hget(other.saga(r), "state") == b"failed"
        assert await events_of(redis, other, r) == before[r]


async def test_a_worker_with_the_sweep_off_deletes_nothing(
    redis: Any, keys: Keys, tmp_path: Path
) -> None:
    """SAGA_RETENTION_SWEEP=off (the chart's workers when the controller archives): the
    maintenance pass leaves due sagas; with it on and an archive, they go, archived."""
    from saga.worker.health import HealthState
    from saga.worker.upkeep import Upkeep

    records = ["r-a", "r-b"]
    sm = await failed_and_due(redis, keys, records)
    await Upkeep(sm, [], "w-off", HealthState(), sweep=False).maintain_once()
    assert await redis.exists(*(keys.saga(r) for r in records)) == 2
    on = Upkeep(sm, [], "w-on", HealthState(), archive_dir=str(tmp_path / "a"))
    await on.maintain_once()
    assert await redis.exists(*(keys.saga(r) for r in records)) == 0
    assert on.archiver is not None and on.archiver.archived == 2
