"""The planted-marker search of test_phi_search, on the surfaces it does not reach: the
review pages and review API, the producer HTTP API (starts, reads and signals, with their
error bodies), `saga review show`, `saga export` and `saga keys status` (issue 35).

Two markers: a patient's name in the document's *file name* (NAME, as test_phi_search
plants it) and another in its *text* (CONTENT). A reviewer is shown a flagged saga's
values, its text included, by design: CONTENT may reach a reviewer's page, NAME never.
Roles without review rights see neither; no log line, error body, export without
``--decrypt``, key report or Redis value in clear (a data key is set) holds either."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest

from saga.state.keys import Keys
from saga.state.machine import StateMachine
from saga.state.requests import CommitRequest
from saga.state.streams import ensure_groups
from saga.steps.models import (
    Biomarker,
    Coverage,
    Extraction,
    ParserOutput,
    Provenance,
    Rejected,
    RouterOutput,
)
from tests.console.support import settings_env
from tests.executor.support import http_status, wait_until
from tests.faults.phi_documents import NAME
from tests.faults.phi_places import cli, console_process
from tests.state.helpers import NEXT, STEPS, claim_next
from tests.steps.pdfgen import make_pdf

pytestmark = pytest.mark.anyio

CONTENT = "Plimsoll Vantablack"
FILE_NEEDLES = (b"zyxwert", b"quondam")
TEXT_NEEDLES = (b"plimsoll", b"vantablack")
HB = "Hemoglobin  11.2 g/dL  12.0 - 15.5 g/dL  L"
PATIENT_LINE = f"Patient: {CONTENT}  Glucose 95 mg/dL"
REASON = "1 value rejected by a check; coverage 50% (1 of 2 result-like lines) under 80%"
ROLES = ("viewer", "producer", "reviewer", "operator")


def found(text: str | bytes, needles: tuple[bytes, ...]) -> bool:
    data = (text.encode() if isinstance(text, str) else text).lower()
    return any(n in data for n in needles)


def leaks(texts: dict[str, str], needles: tuple[bytes, ...]) -> dict[str, str]:
    """What -> the text around the marker, for every text holding one."""
    out = {}
    for what, text in texts.items():
        if found(text, needles):
            low = text.lower()
            at = max(low.find(n.decode()) for n in needles)
            out[what] = text[max(0, at - 160) : at + 60]
    return out


def parser_output() -> bytes:
    """The parser's flagged output: a value, a rejected one, and the unexplained line
    that carries the patient's name (a reviewer is shown it beside its page)."""
    hb = Biomarker(name="Hemoglobin", canonical_name="Hemoglobin", value=11.2, value_text="11.2",
                   unit="g/dL", reference_text="12.0 - 15.5", flag="low",
                   provenance=Provenance(page=2, line=HB, start=12, end=16))  # fmt: skip
    bad = Rejected(name="Sodium", value_text="1450", unit="mmol/L",
                   reason="outside any physiological value for Sodium in mmol/L",
                   provenance=Provenance(page=2, line="Sodium 1450 mmol/L",
                                         start=7, end=11))  # fmt: skip
    missed = [Provenance(page=1, line=PATIENT_LINE)]
    coverage = Coverage(candidate_lines=2, explained_lines=1, unexplained=missed)
    x = Extraction(biomarkers=[hb], rejected=[bad], coverage=coverage)
    return msgspec.json.encode(ParserOutput.of(x, review=REASON))


async def flagged(sm: StateMachine, rid: str, document: Path) -> None:
    """Completed with the parser's output flagged for review, as the real steps leave a
    saga (the router's output names the document, as the real router's does)."""
    await sm.start(rid, "u-1", "router", document=str(document),
                   input_json=msgspec.json.encode({"document": str(document)}))  # fmt: skip
    routed = RouterOutput(document_name=document.name, media_type="application/pdf", page_count=3)
    outputs = {"router": msgspec.json.encode(routed), "parser": parser_output(), "grouper": b"{}"}
    for step in STEPS:
        c = await claim_next(sm, step, "w1")
        review = REASON if step == "parser" else ""
        req = CommitRequest(output=outputs[step], next_step=NEXT[step], worker="w1",
                            review=review, pages=b'["p"]' if step == "router" else None,
                            delete_pages=step == "parser")  # fmt: skip
        assert (await sm.commit(c, req)).code.name == "OK"


async def stored_in_clear(redis: Any, prefix: str) -> list[tuple[str, str, bytes]]:
    """(key, field, value) of every key of this test's prefix, of every type."""
    out: list[tuple[str, str, bytes]] = []
    async for raw in redis.scan_iter(match=f"{prefix}*", count=1000):
        key, kind = raw.decode(errors="replace"), (await redis.type(raw)).decode()
        out.append((key, "<key>", raw))
        if kind == "string":
            out.append((key, "", await redis.get(raw) or b""))
        elif kind == "hash":
            out += [(key, k.decode(), v) for k, v in (await redis.hgetall(raw)).items()]
        elif kind == "stream":
            for eid, fields in await redis.xrange(raw):
                out += [(key, f"{eid.decode()}:{k.decode()}", v) for k, v in fields.items()]
        elif kind == "zset":
            out += [(key, "<member>", m) for m in await redis.zrange(raw, 0, -1)]
        elif kind == "set":
            out += [(key, "<member>", m) for m in await redis.smembers(raw)]
        elif kind == "list":
            out += [(key, "<item>", m) for m in await redis.lrange(raw, 0, -1)]
    return out


async def requests_as(url: str, token: str, rid: str, path: str) -> dict[str, httpx.Response]:
    """Every review page and review call, and the producer API's starts, reads, signals
    and their errors, made with ``token`` (``path``: the document on disk)."""
    review = f"/api/v1/sagas/{rid}/review"
    bad_starts: dict[str, Any] = {
        "start unknown field": {"record_id": "phi-x", "user_id": "u-1", "document": path},
        "start bad input": {"record_id": "phi-x", "user_id": "u-1", "input": {"document": [path]}},
        "start input not an object": {"record_id": "phi-x", "user_id": "u-1", "input": path},
        "start bad priority": {"record_id": "phi-x", "user_id": "u-1", "priority": path},
        "start conflict": {"record_id": rid, "user_id": "u-other", "input": {"document": path}},
    }
    out: dict[str, httpx.Response] = {}
    async with httpx.AsyncClient(
        base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=30
    ) as c:
        for what in ("/review", f"/sagas/{rid}/review", f"/sagas/{rid}/review/page/1"):
            out[f"GET {what}"] = await c.get(what)
        for what in (review, f"{review}/pages/1", "/api/v1/review-queue"):
            out[f"GET {what}"] = await c.get(what)
        out["review bad version"] = await c.post(f"{review}/accept",
                                                 json={"item": "b0", "version": path})  # fmt: skip
        out["review bad item"] = await c.post(
            f"{review}/correct", json={"item": path, "version": 1, "value": 5}
        )
        started = f"phi-api-{token[-6:]}".lower().replace("_", "-")
        out["start"] = await c.post("/api/v1/sagas", json={
            "record_id": started, "user_id": "u-1", "input": {"document": path}})  # fmt: skip
        out["start again"] = await c.post("/api/v1/sagas", json={
            "record_id": started, "user_id": "u-1", "input": {"document": path}})  # fmt: skip
        for what, body in bad_starts.items():
            out[what] = await c.post("/api/v1/sagas", json=body)
        out["read"] = await c.get(f"/api/v1/sagas/{rid}")
        out["read started"] = await c.get(f"/api/v1/sagas/{started}")
        sig = f"/api/v1/sagas/{rid}/signals/approved"
        out["signal ended saga"] = await c.post(sig, json={"data": {"note": CONTENT, "doc": path}})
        out["signal pending saga"] = await c.post(
            f"/api/v1/sagas/{started}/signals/approved", json={"data": {"doc": path}}
        )
        out["signal bad data"] = await c.post(sig, json={"data": [path]})
    return out


@pytest.fixture
def env(redis_url: str, keys: Keys, tmp_path: Path) -> dict[str, str]:
    """The console's and the CLI's environment: the real pipeline, a data key, the docs."""
    key = base64.b64encode(os.urandom(32)).decode()
    docs = tmp_path / "docs"
    docs.mkdir()
    base = {k: v for k, v in os.environ.items() if not k.startswith(("SAGA_", "REDIS_"))}
    return {**base, **settings_env(redis_url, keys, tmp_path / "data"),
            "SAGA_DATA_KEY": key, "SAGA_DOCUMENT_ROOTS": str(docs),
            "SAGA_CONSOLE_START_RATE": "0"}  # fmt: skip


async def test_a_patients_name_in_a_file_name_reaches_no_review_api_export_or_key_report(
    redis: Any, env: dict[str, str], tmp_path: Path
) -> None:
    """A flagged saga of a document named after a patient, read through every review page
    and call, the producer API and the CLI's review, export and key commands, as each
    role: the file name nowhere; the text only on a reviewer's (or operator's) review
    page; roles without review rights refused, with nothing in the refusal."""
    from saga.config.settings import load_settings
    from saga.wiring.runtime import keys_of

    docs = Path(env["SAGA_DOCUMENT_ROOTS"])
    document = docs / f"{NAME} labs.pdf"
    document.write_bytes(make_pdf([["Lab report", PATIENT_LINE], [HB, "Sodium 1450 mmol/L"],
                                   ["Iron 80 ug/dL"]]))  # fmt: skip
    keys = keys_of(load_settings(env))
    assert keys.sealer is not None
    await ensure_groups(redis, keys, STEPS)
    await flagged(StateMachine(redis, keys), "phi-review", document)
    logs = tmp_path / "logs"
    logs.mkdir()
    cli_log = logs / "cli.log"
    tokens = {role: json.loads(cli(env, cli_log, "console", "token", "add", f"t-{role}",
                                   "--role", role, "--json"))["token"]
              for role in ROLES}  # fmt: skip
    with console_process(env, logs / "console.log") as url:

        async def up() -> bool:
            return http_status(int(url.rsplit(":", 1)[1]), "/livez") == 200

        await wait_until(up, within=30, what="the console")
        got = {role: await requests_as(url, tokens[role], "phi-review", str(document))
               for role in ROLES}  # fmt: skip

    check_answers(got)
    texts = {f"{role} {what}": r.text for role, rs in got.items() for what, r in rs.items()
             if not r.headers.get("content-type", "").startswith("image/")}  # fmt: skip
    shown, others = cli_texts(env, cli_log)
    logs_text = {f"log {p.name}": p.read_text(errors="replace") for p in logs.iterdir()}
    assert "review" in logs_text["log console.log"]  # the console's log was written

    everything = {**texts, **shown, **others, **logs_text}
    # an operator's read of a saga shows its document (docs/security.md); a producer's
    # answer for the same saga is a viewer's, without it
    assert found(everything.pop("operator read"), FILE_NEEDLES)
    assert leaks(everything, FILE_NEEDLES) == {}
    reviews = {w for w in texts if w.split()[0] in ("reviewer", "operator")
               and w.split()[1] == "GET" and "review" in w}  # fmt: skip
    no_text = {w: t for w, t in everything.items() if w not in reviews and w not in shown}
    assert leaks(no_text, TEXT_NEEDLES) == {}
    stored = await stored_in_clear(redis, keys.prefix)
    assert stored and [s for s in stored if found(s[2], FILE_NEEDLES + TEXT_NEEDLES)
                       or found(s[0] + s[1], FILE_NEEDLES + TEXT_NEEDLES)] == []  # fmt: skip


def check_answers(got: dict[str, dict[str, httpx.Response]]) -> None:
    """Each call was answered as its role may: the search then reads real answers."""
    for role in ("viewer", "producer"):  # a viewer sees the queue (ids, reasons), no review
        refused = [w for w in got[role] if "/phi-review/review" in w or w.startswith("review ")]
        # a viewer's bad decision was a 400 naming the field, before the role was checked
        assert len(refused) == 6 and {got[role][w].status_code for w in refused} == {403}, role
    assert got["producer"]["GET /api/v1/review-queue"].status_code == 403
    for role in ("reviewer", "operator"):
        rs = got[role]
        review = rs["GET /api/v1/sagas/phi-review/review"]
        assert review.status_code == rs["GET /sagas/phi-review/review"].status_code == 200
        png = rs["GET /api/v1/sagas/phi-review/review/pages/1"]
        assert png.headers["content-type"].startswith("image/png")
        assert found(review.text, TEXT_NEEDLES)  # a reviewer is shown the text, by design
        assert found(rs["GET /sagas/phi-review/review"].text, TEXT_NEEDLES)
    p = got["producer"]
    assert p["start"].status_code == 201 and p["start again"].status_code == 200, p["start"].text
    bad = ("start unknown field", "start bad input", "start input not an object",
           "start bad priority", "signal bad data")  # fmt: skip
    assert {p[w].status_code for w in bad} == {400}
    assert p["start conflict"].status_code == 409
    # the document pipeline never waits for "approved": refused before the saga is read
    assert p["signal ended saga"].status_code == 422


def cli_texts(env: dict[str, str], log: Path) -> tuple[dict[str, str], dict[str, str]]:
    """``saga review show`` (the values, by design), and what else the CLI prints: the
    export as stored (sealed), the key report, and both under a wrong data key."""
    shown = {f"saga review show {fmt}": cli(env, log, "review", "show", "phi-review", *fmt)
             for fmt in ((), ("--json",))}  # fmt: skip
    assert all(found(t, TEXT_NEEDLES) for t in shown.values())
    assert found(cli(env, log, "export", "--decrypt"), FILE_NEEDLES)  # the export holds it
    out = {"saga export": cli(env, log, "export")}
    out |= {f"saga keys status {' '.join(fmt)}": cli(env, log, "keys", "status", *fmt)
            for fmt in ((), ("--json",))}  # fmt: skip
    wrong = {**env, "SAGA_DATA_KEY": base64.b64encode(os.urandom(32)).decode()}
    for what, args in {"export, wrong key": ("export", "--decrypt"),
                       "keys status, wrong key": ("keys", "status")}.items():  # fmt: skip
        res = subprocess.run([sys.executable, "-m", "saga.cli.main", *args], env=wrong,
                             capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
        out[what] = res.stdout + res.stderr
        assert "Traceback" not in out[what], out[what]  # it was a SealError's traceback
        if what.startswith("export"):
            assert res.returncode == 1 and res.stderr.count("\n") == 1, res.stderr
    return shown, out
