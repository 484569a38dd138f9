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
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from saga.state.model import SagaState
from tests.adapters.support import Reply, error_reply
from tests.adapters.support import serve as serve_stub
from tests.executor.support import REPO, free_port, http_status, spawn_worker, wait_until
from tests.faults.harness import FaultRun, read_metrics

pytestmark = pytest.mark.anyio

NAME = "Zyxwert Quondam"
NEEDLES = (b"zyxwert", b"quondam")
"""Either word, searched for case-insensitively: in every spelling of the name (%20, +,
lower case), and in a part of it left over by a mask (main's scrubber hid a long run that
ended in "Zyxwert" and showed "Quondam")."""


# -- the documents ------------------------------------------------------------------------


def named_pdf(lines: list[list[str]], *, title: str = NAME) -> bytes:
    from fpdf import FPDF

    pdf = FPDF(format="A4")
    pdf.set_title(title)
    pdf.set_author(f"Dr. {NAME}")
    pdf.set_subject(f"results of {NAME}")
    pdf.set_font("Helvetica", size=10)
    for page in lines:
        pdf.add_page()
        for line in page:
            pdf.cell(0, 7, line, new_x="LMARGIN", new_y="NEXT")
    return bytes(pdf.output())


def scan_pdf() -> bytes:
    """A page drawn, not written (a scan): no text layer, the name in its metadata."""
    from fpdf import FPDF

    pdf = FPDF(format="A4")
    pdf.set_title(f"scan of {NAME}")
    pdf.add_page()
    for i in range(40):
        pdf.rect(10 + i * 4, 10 + i * 5, 30, 8, style="F")
    return bytes(pdf.output())


def local_documents(root: Path, outside: Path) -> dict[str, str]:
    """Record id -> reference, one per local failure (and one that routes)."""
    text = [[f"Patient: {NAME}", "Hemoglobin A1c 5.6 %", "Glucose 95 mg/dL 70 - 99"]]
    folder = root / NAME
    folder.mkdir(parents=True)
    (folder / f"{NAME} routed.pdf").write_bytes(named_pdf(text))
    (outside / f"{NAME} outside.pdf").write_bytes(named_pdf(text))
    (folder / f"{NAME} broken.pdf").write_bytes(b"%PDF-1.7\n" + f"{NAME} ".encode() * 50)
    (folder / f"{NAME} bomb.pdf").write_bytes(named_pdf(text * 5))
    (folder / f"{NAME} big.txt").write_text(f"{NAME}\n" * 8000)
    (folder / f"{NAME} scan.pdf").write_bytes(scan_pdf())
    (folder / f"{NAME} dir.pdf").mkdir()
    return {
        "phi-routed": str(folder / f"{NAME} routed.pdf"),  # reaches the parser's LLM
        "phi-refused": str(outside / f"{NAME} outside.pdf"),
        "phi-missing": str(folder / f"{NAME} missing.pdf"),
        "phi-missing-url": (folder / f"{NAME} gone.pdf").as_uri(),
        "phi-broken": str(folder / f"{NAME} broken.pdf"),
        "phi-bomb": str(folder / f"{NAME} bomb.pdf"),
        "phi-big": str(folder / f"{NAME} big.txt"),
        "phi-scan": str(folder / f"{NAME} scan.pdf"),
        "phi-dir": str(folder / f"{NAME} dir.pdf"),
        "phi-scheme": NAME.replace(" ", ":") + ".pdf",  # a "scheme" that is a name
    }


@contextmanager
def records_server() -> Iterator[str]:
    """A records API on loopback: hangs on /records/slow/, 404 on /records/gone/, and a
    redirect out of the allowed prefix on /records/moved/ (every path carries the name)."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path.startswith("/records/slow/"):
                self.server.hang.wait(60)  # type: ignore[attr-defined]
                return
            if self.path.startswith("/records/moved/"):
                self.send_response(302)
                self.send_header("location", f"/elsewhere/{NAME.replace(' ', '%20')}.pdf")
                self.send_header("content-length", "0")
                self.end_headers()
                return
            body = f"no record for {NAME}".encode()
            self.send_response(404)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    server.hang = threading.Event()  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.hang.set()  # type: ignore[attr-defined]
        server.shutdown()
        server.server_close()


def url_documents(base: str) -> dict[str, str]:
    quoted = NAME.replace(" ", "%20")
    query = f"patient={NAME.replace(' ', '+')}&sig=abc"
    return {
        "phi-slow": f"{base}/records/slow/{quoted}.pdf?{query}",
        "phi-404": f"{base}/records/gone/{quoted}.pdf?{query}",
        "phi-moved": f"{base}/records/moved/{quoted}.pdf?{query}",
    }


def echoing_model(request: Any) -> Reply:
    """An OpenAI-compatible provider that refuses the request and quotes it back."""
    return error_reply(400, f"cannot process: {json.dumps(request.body)[:4000]}")


@contextmanager
def trace_collector() -> Iterator[tuple[str, list[bytes]]]:
    """An OTLP/HTTP endpoint keeping every body it is sent (protobuf keeps strings as is)."""
    bodies: list[bytes] = []

    class Collector(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            bodies.append(self.rfile.read(int(self.headers.get("content-length") or 0)))
            self.send_response(200)
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Collector)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", bodies
    finally:
        server.shutdown()
        server.server_close()


# -- searching ---------------------------------------------------------------------------


async def redis_items(client: Any) -> list[tuple[str, str, bytes]]:
    """(key, field, value) of every key of every type, and ("SLOWLOG", "", entry)."""
    out: list[tuple[str, str, bytes]] = []
    async for raw in client.scan_iter(count=1000):
        key = raw.decode(errors="replace")
        kind = (await client.type(raw)).decode()
        out.append((key, "<key>", raw))
        if kind == "string":
            out.append((key, "", await client.get(raw) or b""))
        elif kind == "hash":
            out += [
                (key, k.decode(errors="replace"), v) for k, v in (await client.hgetall(raw)).items()
            ]
        elif kind == "stream":
            for entry_id, fields in await client.xrange(raw):
                out += [(key, f"{entry_id.decode()}:{k.decode()}", v) for k, v in fields.items()]
        elif kind == "zset":
            out += [(key, "<member>", m) for m in await client.zrange(raw, 0, -1)]
        elif kind == "set":
            out += [(key, "<member>", m) for m in await client.smembers(raw)]
        elif kind == "list":
            out += [(key, "<item>", m) for m in await client.lrange(raw, 0, -1)]
        else:
            out.append((key, f"<{kind}>", b""))
    for entry in await client.execute_command("SLOWLOG", "GET", "-1"):
        out.append(("SLOWLOG", "", repr(entry).encode()))
    return out


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


def cli(env: dict[str, str], log: Path, *args: str) -> str:
    """``saga <args>`` as a process; its stderr (log lines and errors) goes to ``log``."""
    done = subprocess.run(
        [sys.executable, "-m", "saga.cli.main", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    with log.open("a") as f:
        f.write(done.stderr)
    assert done.returncode in (0, 1), done.stderr
    return done.stdout


@contextmanager
def console_process(env: dict[str, str], log: Path) -> Iterator[str]:
    port = free_port()
    out = open(log, "ab")  # noqa: SIM115 - the child keeps it
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "saga.cli.main", "console", "--port", str(port)],
            cwd=REPO,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
        )
    finally:
        out.close()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


async def read_console(
    env: dict[str, str], cli_log: Path, log: Path, rids: list[str]
) -> tuple[dict[str, str], dict[str, str]]:
    """The console's pages and API read with a viewer's token, then an operator's."""
    tokens = {
        role: json.loads(cli(env, cli_log, "console", "token", "add", f"t-{role}",
                             "--role", role, "--json"))["token"]
        for role in ("viewer", "operator")
    }  # fmt: skip
    with console_process(env, log) as url:

        async def up() -> bool:
            return http_status(int(url.rsplit(":", 1)[1]), "/livez") == 200

        await wait_until(up, within=30, what="the console")
        return (
            await console_texts(url, tokens["viewer"], rids),
            await console_texts(url, tokens["operator"], rids),
        )


async def console_texts(url: str, token: str, rids: list[str]) -> dict[str, str]:
    """Every page and API answer a person with ``token`` can read about these sagas."""
    paths = ["/sagas", "/sagas?state=failed", "/dead-letters", "/queues", "/api/v1/sagas"]
    paths += ["/api/v1/sagas?state=failed", "/api/v1/dead-letters", "/api/v1/queues"]
    for rid in rids:
        paths += [f"/sagas/{rid}", f"/sagas/{rid}/history", f"/api/v1/sagas/{rid}"]
    out = {}
    async with httpx.AsyncClient(
        base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=30
    ) as client:
        for path in paths:
            res = await client.get(path)
            assert res.status_code == 200, (path, res.status_code, res.text[:300])
            out[path] = res.text
    return out


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
        from saga.client import SagaClient
        from saga.runtime import document_pipeline, keys_of
        from saga.settings import load_settings

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


async def wait_metrics(port: int) -> str:
    async def up() -> bool:
        return http_status(port, "/metrics") == 200

    await wait_until(up, within=10, what="/metrics")
    return await anyio.to_thread.run_sync(read_metrics, port)
