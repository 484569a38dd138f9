"""A patient's name in a document's path, file name, URL (path and query), PDF metadata and
text, through every failure the router and the parser can produce (issue 27 §1, issue 30
§3): refused path, missing file, a directory, an unreadable PDF, a page bomb, a document
over the byte limit, a timeout, HTTP 404, a redirect the policy refuses, a scan with no
text layer, and an LLM error that echoes the prompt. Then everything is searched: every
log line of every process (worker, its extraction processes, the console, each CLI run),
every key of every type in Redis and SLOWLOG (every command logged), /metrics, the
exported traces, ``saga show|list|dlq --json``, and the console's pages and API as a
viewer. The name is found only where it is sealed or shown to an operator; without a
data key, only in the fields docs/security.md lists as clear text."""

from __future__ import annotations

import base64
import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest

from saga.state.model import SagaState
from tests.adapters.support import serve as serve_stub
from tests.executor.support import spawn_worker
from tests.faults.harness import FaultRun
from tests.faults.phi_documents import (
    NAME,
    NEEDLES,
    echoing_model,
    local_documents,
    records_server,
    url_documents,
)
from tests.faults.phi_places import cli, read_console, redis_items, trace_collector, wait_metrics

pytestmark = pytest.mark.anyio


def clear_by_design(key: str, field: str) -> bool:
    """Without a data key, where docs/security.md says patient data is stored in clear:
    the document reference and step inputs/outputs in the saga hash, the pages blob, the
    cached LLM answers, and SLOWLOG (when configured to log every command)."""
    if key == "SLOWLOG":
        return True
    if ":pages:" in key or ":llm:" in key:
        return True
    return field == "doc" or field.startswith(("out:", "ckpt:"))


def hits(text: bytes | str) -> bool:
    data = (text.encode() if isinstance(text, str) else text).lower()
    return any(needle in data for needle in NEEDLES)


def where(text: str) -> str:
    low = text.lower()
    at = max(low.find(needle.decode()) for needle in NEEDLES)
    return text[max(0, at - 200) : at + 80]


# -- the run -----------------------------------------------------------------------------


def phi_env(
    run: FaultRun, key: str, root: Path, records: str, model: str, traces: str
) -> dict[str, str]:
    env = run.env(SAGA_DATA_KEY=key)
    env.pop("SAGA_PIPELINE")  # the real document pipeline
    return {
        **env,
        "SAGA_ROUTER_MAX_ATTEMPTS": "1",
        "SAGA_PARSER_MAX_ATTEMPTS": "1",
        "SAGA_ROUTER_TIMEOUT": "12",  # the timeout case; a loaded machine needs the margin
        "SAGA_DOCUMENT_ROOTS": str(root),
        "SAGA_DOCUMENT_URL_PREFIXES": f"{records}/records/",
        "SAGA_DOCUMENT_NETWORKS": "127.0.0.0/8",
        "SAGA_MAX_PAGES": "3",
        "SAGA_MAX_DOCUMENT_BYTES": "60000",
        "SAGA_PARSER": "llm",
        "SAGA_LLM_MODEL": "openai/gpt-4o-mini",
        "SAGA_LLM_API_BASE": f"{model}/v1",
        "SAGA_LLM_API_KEY": "sk-phi-test",
        "OTEL_EXPORTER_OTLP_ENDPOINT": traces,
        "OTEL_BSP_SCHEDULE_DELAY": "200",
    }


@pytest.mark.parametrize("sealed", [True, False], ids=["data-key", "no-key"])
async def test_a_patients_name_in_a_document_is_found_only_where_sealed_or_shown_to_operators(
    run: FaultRun, sealed: bool
) -> None:
    """Every router and parser failure of documents named after a patient: the name is in
    no log line, metric, trace, error, dead letter, list or viewer's page; with a data key
    nowhere in Redis in clear, only in the operator's opened detail; without one only in
    the fields docs/security.md names as clear, and no error detail is stored at all."""
    key = base64.b64encode(os.urandom(32)).decode() if sealed else ""
    await run.redis.execute_command("CONFIG", "SET", "slowlog-log-slower-than", "0")
    await run.redis.execute_command("CONFIG", "SET", "slowlog-max-len", "100000")
    root, outside = run.tmp / "docs", run.tmp / "elsewhere"
    logs = run.tmp / "logs"
    for folder in (outside, logs):
        folder.mkdir()
    with (
        records_server() as records,
        serve_stub(echoing_model) as model,
        trace_collector() as (traces, bodies),
    ):
        env = phi_env(run, key, root, records, model.url, traces)
        refs = {**local_documents(root, outside), **url_documents(records)}
        worker = spawn_worker(env, logs / "worker.log", ["router", "parser", "grouper"])
        run.workers.append(worker)
        await worker.wait_ready(within=120)
        from saga.api.client import SagaClient
        from saga.config.settings import load_settings
        from saga.wiring.runtime import document_pipeline, keys_of

        settings = load_settings(env)
        keys = keys_of(settings)
        assert (keys.sealer is not None) == sealed and keys.prefix == run.keys.prefix
        sagas = SagaClient(run.redis, keys, document_pipeline(settings), settings)
        for rid, ref in refs.items():
            await sagas.start(rid, "u1", document=ref)
        rids = list(refs)
        await run.wait_terminal(rids, within=120)
        ended = {rid: await sagas.get(rid) for rid in rids}
        assert {s.state for s in ended.values()} == {SagaState.FAILED}, {
            r: (s.state, s.step, s.error_class) for r, s in ended.items()
        }
        assert ended["phi-routed"].step == "parser" and model.count("/v1/chat") >= 1
        assert hits(json.dumps(model.requests[0].body))  # the prompt the provider echoed
        metrics = await wait_metrics(worker.port)

        cli_env = {**env, "REDIS_URL": run.server.url, "SAGA_CONSOLE_SECRET": "s" * 32}
        cli_log = logs / "cli.log"
        listed = {
            "list": cli(cli_env, cli_log, "list", "--json", "--limit", "100"),
            "dlq list": cli(cli_env, cli_log, "dlq", "list", "--json"),
        }
        shown = {rid: json.loads(cli(cli_env, cli_log, "show", rid, "--json")) for rid in rids}
        viewer, operator = await read_console(cli_env, cli_log, logs / "console.log", rids)
        worker.signal(signal.SIGTERM)  # a drain flushes the spans still batched
        await worker.wait_exit(within=30)
        stored = await redis_items(run.redis)

    check_classes(ended)
    details = {rid: doc["saga"].get("error_detail", "") for rid, doc in shown.items()}
    texts = {f"log {p.name}": p.read_text(errors="replace") for p in logs.iterdir()}
    texts |= {"metrics": metrics, "traces": repr(bodies), **listed}
    texts |= {f"saga error {r}": f"{s.error_class}: {s.error_message}" for r, s in ended.items()}
    texts |= {f"viewer {path}": page for path, page in viewer.items()}
    for rid, doc in shown.items():  # an operator's view: the document and detail are theirs
        doc["saga"].pop("document")
        doc["saga"].pop("error_detail", None)
        texts[f"saga show {rid}"] = json.dumps(doc)
    assert bodies, "no spans were exported"
    assert len(texts["log worker.log"].splitlines()) > 20  # the log was searched, not empty
    check_texts(texts)
    check_redis(stored, sealed)
    check_details(stored, sealed, details, operator)


def check_classes(ended: dict[str, Any]) -> None:
    """Every failure was met: the error classes a reader sees."""
    classes = {rid: s.error_class for rid, s in ended.items()}
    assert classes == {
        "phi-routed": "PermanentError", "phi-refused": "PolicyError",
        "phi-missing": "NotFoundError", "phi-missing-url": "NotFoundError",
        "phi-broken": "InvalidInputError", "phi-bomb": "PayloadTooLargeError",
        "phi-big": "PayloadTooLargeError", "phi-scan": "InvalidInputError",
        "phi-dir": "InvalidInputError", "phi-scheme": "InvalidInputError",
        "phi-slow": "StepTimeoutError", "phi-404": "NotFoundError", "phi-moved": "PolicyError",
    }, {r: (s.error_class, s.error_message) for r, s in ended.items()}  # fmt: skip


def check_texts(texts: dict[str, str]) -> None:
    """Logs of every process, metrics, traces, errors, dead letters, lists, viewer's pages:
    every place the name is found is reported at once."""
    found = {what: where(text) for what, text in texts.items() if hits(text)}
    assert not found, f"{NAME} found in {sorted(found)}: {found}"


def check_redis(stored: list[tuple[str, str, bytes]], sealed: bool) -> None:
    """Every key, every field, every stream entry, SLOWLOG."""
    leaked = [(k, f, v[:160]) for k, f, v in stored if hits(v) or hits(k) or hits(f)]
    if sealed:
        assert not leaked, f"{NAME} in clear in Redis: {leaked[:5]}"
    else:
        assert [x for x in leaked if not clear_by_design(x[0], x[1])] == [], leaked[:5]
        assert any(k == "SLOWLOG" for k, _, _ in leaked)  # what security.md warns of


def check_details(
    stored: list[tuple[str, str, bytes]],
    sealed: bool,
    details: dict[str, str],
    operator: dict[str, str],
) -> None:
    """The operator's detail: opened for operators with a key; never stored without one."""
    ems = [v for _, f, v in stored if f == "em" or f.endswith(":em")]
    assert ems and any(b"\x1e" in v for v in ems) == sealed
    api = json.loads(operator["/api/v1/sagas/phi-refused"])
    if sealed:
        assert NAME in details["phi-refused"] and NAME in details["phi-missing"], details
        moved = details["phi-moved"]
        assert "elsewhere/Zyxwert" in moved and "redirected from" in moved, moved
        assert "sig=" not in moved and "patient=" not in moved, moved  # no query, even here
        assert NAME in api["saga"]["error_detail"]
        page = operator["/sagas/phi-refused"]
        assert 'id="error-detail"' in page and NAME in page.split('id="error-detail"')[1][:2000]
    else:
        assert set(details.values()) == {""}, details
        assert api["saga"].get("error_detail", "") == ""
