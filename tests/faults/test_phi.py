"""Patient data at rest and in every output (defect 4): with ``SAGA_DATA_KEY`` a marker
in page texts, in an LLM answer and in a signed URL's token appears nowhere — not in
Redis (any key, SLOWLOG with every command logged), not in worker logs or /metrics, not
in history or dead letters, not in ``saga show|list|dlq --json``. Without the key the
same SLOWLOG holds page text: what docs/security.md tells operators to configure."""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path
from typing import Any

import pytest

from saga.state.model import SagaState
from tests.executor.support import free_port, spawn_worker, wait_until
from tests.faults.harness import FaultRun
from tests.faults.phi_places import saga_run, wait_metrics
from tests.steps.pdfgen import make_pdf

pytestmark = pytest.mark.anyio

MARKER = "ZQXPHI4471"
ANSWER = json.dumps({"names": {}, "note": f"patient {MARKER}"})


def phi_env(run: FaultRun, key: str) -> dict[str, str]:
    """The real document pipeline; its fetch policy lets it read the test's documents
    (under run.tmp) and try the signed URL on loopback, so that fetch fails on the
    connection (with the token in hand), not on the policy."""
    env = run.env(SAGA_LLM_GROUP_NAMES="1", SAGA_LLM_MOCK_RESPONSE=ANSWER, SAGA_DATA_KEY=key)
    env.pop("SAGA_PIPELINE")
    return {
        **env,
        "SAGA_ROUTER_MAX_ATTEMPTS": "1",
        "SAGA_DOCUMENT_ROOTS": str(run.tmp),
        "SAGA_DOCUMENT_URL_PREFIXES": "http://",
        "SAGA_DOCUMENT_NETWORKS": "127.0.0.0/8",
    }


def documents(tmp: Path, n: int) -> list[str]:
    paths = []
    for i in range(n):
        path = tmp / f"report-{i}.pdf"
        lines = [f"Patient: {MARKER} Doe", "Hemoglobin A1c 5.6 %", "Zorblium 7.1 mg/dL"]
        path.write_bytes(make_pdf([lines]))
        paths.append(str(path))
    return paths


async def everything_in_redis(client: Any) -> bytes:
    """Every value of every key, and SLOWLOG with each command's arguments."""
    out = []
    async for key in client.scan_iter(count=1000):
        kind = (await client.type(key)).decode()
        if kind == "string":
            out.append(await client.get(key) or b"")
        elif kind == "hash":
            out += [k + b"=" + v for k, v in (await client.hgetall(key)).items()]
        elif kind == "stream":
            out += [repr(f).encode() for _, f in await client.xrange(key)]
        elif kind == "zset":
            out += await client.zrange(key, 0, -1)
        out.append(key)
    out += [repr(e).encode() for e in await client.execute_command("SLOWLOG", "GET", "-1")]
    return b"\n".join(out)


def cli(run: FaultRun, key: str, *args: str) -> str:
    done = saga_run({**phi_env(run, key), "REDIS_URL": run.server.url}, *args)
    return done.stdout + done.stderr


async def test_no_phi_anywhere_with_a_data_key(run: FaultRun) -> None:
    """SAGA_DATA_KEY on: the marker is in no Redis value, SLOWLOG entry, log line, metric,
    history, dead letter, or --json output; the sagas still complete (and one dead-letters)."""
    key = base64.b64encode(os.urandom(32)).decode()
    await run.redis.execute_command("CONFIG", "SET", "slowlog-log-slower-than", "0")
    await run.redis.execute_command("CONFIG", "SET", "slowlog-max-len", "100000")
    env = phi_env(run, key)
    worker = spawn_worker(env, run.tmp / "worker-phi.log", ["router", "parser", "grouper"])
    run.workers.append(worker)
    await worker.wait_ready(within=120)
    rids = [f"phi-{i}" for i in range(3)]
    from saga.api.client import SagaClient
    from saga.config.settings import load_settings
    from saga.wiring.runtime import document_pipeline, keys_of

    settings = load_settings(env)
    keys = keys_of(settings)
    assert keys.sealer is not None and keys.prefix == run.keys.prefix
    sagas = SagaClient(run.redis, keys, document_pipeline(settings), settings)
    for rid, doc in zip(rids, documents(run.tmp, 3), strict=True):
        await sagas.start(rid, "u1", document=doc)
    signed = f"http://127.0.0.1:{free_port()}/doc.pdf?token={MARKER}"
    await sagas.start("phi-url", "u1", document=signed)
    await run.wait_terminal([*rids, "phi-url"], within=90)
    done = [await sagas.get(r) for r in rids]
    assert {s.state for s in done} == {SagaState.COMPLETED}, [s.error_message for s in done]
    url_saga = await sagas.get("phi-url")
    assert url_saga.state == SagaState.FAILED
    assert url_saga.error_class != "PolicyError", url_saga.error_message  # it was fetched
    assert MARKER in json.dumps((await sagas.get("phi-url")).document)  # readers get it back

    stored = await everything_in_redis(run.redis)
    assert b"Zorblium" not in stored and b"Hemoglobin" not in stored  # pages and outputs sealed
    at = stored.find(MARKER.encode())
    assert at < 0, f"{MARKER} stored in Redis: {stored[max(0, at - 300) : at + 100]!r}"
    metrics = await wait_metrics(worker.port)
    outputs = [cli(run, key, "show", r, "--json") for r in [*rids, "phi-url"]]
    outputs += [cli(run, key, "list", "--json"), cli(run, key, "dlq", "list", "--json")]
    logs = worker.log.read_text()
    for name, text in [("metrics", metrics), ("cli", "\n".join(outputs)), ("logs", logs)]:
        assert MARKER not in text, f"{MARKER} found in {name}"
    assert "report-0.pdf" not in logs  # document names are not logged


async def test_slowlog_holds_page_text_without_a_data_key(run: FaultRun) -> None:
    """No data key and every command logged: SLOWLOG holds the page text (the first 128
    bytes of each argument) — why operators must turn SLOWLOG off or restrict it."""
    await run.redis.execute_command("CONFIG", "SET", "slowlog-log-slower-than", "0")
    env = phi_env(run, "")
    worker = spawn_worker(env, run.tmp / "worker-clear.log", ["router"])
    run.workers.append(worker)
    await worker.wait_ready(within=120)
    from saga.api.client import SagaClient
    from saga.config.settings import load_settings
    from saga.wiring.runtime import document_pipeline

    settings = load_settings(env)
    sagas = SagaClient(run.redis, run.keys, document_pipeline(settings), settings)
    await sagas.start("clear-0", "u1", document=documents(run.tmp, 1)[0])

    async def routed() -> bool:
        return (await sagas.get("clear-0")).step == "parser"

    await wait_until(routed, within=60, what="the router to commit")
    slowlog = repr(await run.redis.execute_command("SLOWLOG", "GET", "-1"))
    assert MARKER in slowlog
