"""The restore drill, real servers and `saga worker` processes: the document pipeline
(router → parser → grouper → publish to a real HTTP results service) runs on server A; a
backup is taken mid-run (AOF rewrite + copy, and a BGSAVE snapshot); A finishes and is
gone. A new server B started on the backup, with new workers, brings every saga of the
backup to its end, each step committed once in B's history. The steps that had committed
in A after the backup (here: the second wave's publish, held by a 503 while the backup
was taken) run again in B and post under the same idempotency key
(``<record>:publish:e1``): an endpoint that keys on it keeps one publication a record.
The snapshot loads into a server started with appendonly off."""

from __future__ import annotations

import subprocess
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from redis.exceptions import RedisError

from saga.adapters.embedded_redis import EmbeddedServer, server_binary
from saga.api.client import SagaClient
from saga.config.settings import Settings
from saga.lifecycle.backup import backup_aof, backup_rdb
from saga.state.connection import connect
from saga.state.keys import Keys
from saga.state.model import EventType
from saga.state.reads import get_saga_and_history
from tests.executor import pipelines
from tests.executor.support import (
    free_port,
    spawn_worker,
    states,
    wait_until,
    worker_base_env,
    worker_env,
)
from tests.executor.test_publish import ResultsServer
from tests.steps.pdfgen import make_pdf

pytestmark = pytest.mark.anyio

STEPS = ("router", "parser", "grouper", "publish")


@pytest.fixture
def results() -> Any:
    server = ResultsServer()
    server.thread.start()
    yield server
    server.http.shutdown()
    server.http.server_close()


def committed(events: list[Any]) -> set[str]:
    return {e.step for e in events if e.event == EventType.COMMITTED}


RECORDS = [f"r-{i}" for i in range(12)]


def drill_env(results: ResultsServer, docs: Path) -> dict[str, str]:
    return {
        "SAGA_RESULTS_URL": results.url,
        "SAGA_DOCUMENT_ROOTS": str(docs),
        "SAGA_PIPELINE": "",
        "SAGA_PUBLISH_BACKOFF": "0.05",
        "SAGA_PUBLISH_MAX_ATTEMPTS": "20",
        # Attempts under way at the backup hold leases of A's workers: B's reclaim them
        # when the lease ends (the recovery loop), so a short lease keeps the drill short.
        **{f"SAGA_{s.upper()}_LEASE": "3" for s in STEPS},
    }


async def run_on_a(keys: Keys, tmp_path: Path, results: ResultsServer, env: dict[str, str]) -> int:
    """Server A: a first wave completes; a second is held at publish while the AOF copy
    (tmp/backup) and the snapshot (tmp/snapshot) are taken; A then finishes both. Returns
    how many requests the results service had by then."""
    a = EmbeddedServer(data_dir=tmp_path / "a", tied=True)
    a.start()
    ra = connect(a.url)
    base = worker_env(worker_base_env(a.url, keys, tmp_path / "wa"), **env)
    worker = spawn_worker(base, tmp_path / "worker-a.log", STEPS)
    try:
        await worker.wait_ready(within=90)
        client = SagaClient(ra, keys, pipelines.pipeline(), Settings())
        docs = Path(env["SAGA_DOCUMENT_ROOTS"])

        async def start(rids: list[str]) -> None:
            for rid in rids:
                await client.start(rid, "u1", document=str(docs / f"{rid}.pdf"))

        async def ended(rids: list[str]) -> bool:
            return await states(ra, keys, rids) == ["completed"] * len(rids)

        await start(RECORDS[:6])
        await wait_until(
            lambda: ended(RECORDS[:6]), within=90, what="wave 1", on_timeout=worker.tail
        )
        results.status["POST"] = 503  # publish retries: the second wave waits there

        async def held() -> bool:
            steps = [await ra.hget(keys.saga(r), "step") for r in RECORDS[6:]]
            return steps == [b"publish"] * 6

        await start(RECORDS[6:])
        await wait_until(held, within=90, what="the second wave at publish")
        await backup_aof(ra, tmp_path / "a", tmp_path / "backup")
        await backup_rdb(ra, tmp_path / "a", tmp_path / "snapshot")
        results.status["POST"] = 201
        await wait_until(lambda: ended(RECORDS), within=90, what="A's run", on_timeout=worker.tail)
        return len(results.calls())
    finally:
        worker.kill()
        await ra.aclose()
        a.stop()


async def restore_on_b(
    keys: Keys, tmp_path: Path, env: dict[str, str]
) -> tuple[dict[str, set[str]], dict[str, Counter[str]], float]:
    """Server B on the AOF copy, new workers: (steps committed at the backup, commits per
    step at the end), per record, and the seconds from B's start to every saga's end."""
    b_dir = tmp_path / "b"
    b_dir.mkdir()
    (tmp_path / "backup" / "appendonlydir").rename(b_dir / "appendonlydir")
    b = EmbeddedServer(data_dir=b_dir, tied=True)
    began = time.monotonic()
    b.start()
    rb = connect(b.url)
    worker = None
    try:
        at_backup = {}
        for rid in RECORDS:
            _, events = await get_saga_and_history(rb, keys, rid)
            at_backup[rid] = committed(events)
        base = worker_env(worker_base_env(b.url, keys, tmp_path / "wb"), **env)
        worker = spawn_worker(base, tmp_path / "worker-b.log", STEPS)
        await worker.wait_ready(within=90)

        async def b_done() -> bool:
            return await states(rb, keys, RECORDS) == ["completed"] * 12

        await wait_until(b_done, within=120, what="the restored run", on_timeout=worker.tail)
        recovery_s = time.monotonic() - began
        commits = {}
        for rid in RECORDS:
            _, events = await get_saga_and_history(rb, keys, rid)
            commits[rid] = Counter(e.step for e in events if e.event == EventType.COMMITTED)
        return at_backup, commits, recovery_s
    finally:
        if worker is not None:
            worker.kill()
        await rb.aclose()
        b.stop()


async def test_a_backup_taken_mid_run_restores_and_every_saga_ends_once(
    keys: Keys, tmp_path: Path, results: ResultsServer
) -> None:
    """Every saga in the backup reaches its end on the restored server, each step with one
    commit; re-run steps re-post under the same idempotency key; nothing is lost."""
    docs = tmp_path / "docs"
    docs.mkdir()
    for i, rid in enumerate(RECORDS):
        (docs / f"{rid}.pdf").write_bytes(make_pdf([[f"HbA1c  {5 + i / 10:.1f}  %  4.0 - 5.6"]]))
    env = drill_env(results, docs)
    in_a = await run_on_a(keys, tmp_path, results, env)
    at_backup, commits, recovery_s = await restore_on_b(keys, tmp_path, env)
    posted: dict[str, set[str]] = {}
    for m, _, k in results.calls():
        if m == "POST":
            posted.setdefault(k.partition(":")[0], set()).add(k)
    summary_row(
        sagas=len(RECORDS),
        lost=sum(c.get("publish", 0) == 0 for c in commits.values()),
        double_commits=sum(n - 1 for c in commits.values() for n in c.values() if n > 1),
        double_charges=sum(len(k) - 1 for k in posted.values()),  # a second publication key
        reclaimed=sum(len(set(STEPS) - at_backup[r]) for r in RECORDS),
        recovery_s=round(recovery_s, 2),
    )
    assert all(at_backup[r] == set(STEPS) for r in RECORDS[:6]), at_backup
    for rid in RECORDS:
        assert commits[rid] == Counter(STEPS), (rid, commits[rid])  # each step once, in B
    rerun = {r: set(STEPS) - at_backup[r] for r in RECORDS[6:]}
    assert rerun == {r: {"publish"} for r in RECORDS[6:]}  # committed in A after the backup
    assert {k for m, _, k in results.calls() if m == "POST"} == {
        f"{r}:publish:e1" for r in RECORDS
    }  # one key per record, whoever posted
    in_b = Counter(k for m, _, k in results.calls()[in_a:] if m == "POST")
    assert in_b == Counter({f"{r}:publish:e1": 1 for r in RECORDS[6:]})  # A's key, again
    assert all(m == "POST" for m, _, _ in results.calls())  # nothing retracted
    await snapshot_loads(keys, tmp_path / "snapshot")


def summary_row(**row: Any) -> None:
    """The drill's row of docs/reliability.md's fault table (SAGA_FAULT_SUMMARY, as the
    fault suite writes them; stuck sagas fail the wait before this). "steps reclaimed"
    here: the steps the restored server ran again."""
    import json
    import os

    full = {"fault": "restore drill from a mid-run backup", "faults": 1, "stuck": 0, **row}
    print("\nfault-summary " + json.dumps(full))
    path = os.environ.get("SAGA_FAULT_SUMMARY")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps(full) + "\n")


async def snapshot_loads(keys: Keys, snapshot: Path) -> None:
    """The snapshot taken beside it: an external Redis restores it with appendonly off."""
    import anyio

    port = free_port()
    server = subprocess.Popen(  # noqa: ASYNC220 (a server process, stopped below)
        [str(server_binary()), "--port", str(port), "--bind", "127.0.0.1", "--dir",
         str(snapshot), "--appendonly", "no", "--save", ""],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    client = connect(f"redis://127.0.0.1:{port}")
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                await client.ping()
                break
            except (ConnectionError, OSError, RedisError):
                if time.monotonic() > deadline:
                    raise
                await anyio.sleep(0.05)
        assert await client.exists(*(keys.saga(r) for r in RECORDS)) == 12
    finally:
        await client.aclose()
        server.terminate()
        server.wait(10)
