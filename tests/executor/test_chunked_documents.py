"""The chunked document pipeline (``saga.documents.chunked``: router -> plan -> parse_chunk,
a map, -> merge -> grouper) in real worker processes, a real server and a local
OpenAI-compatible model: a long document is one item per model request, each its own
attempt; a worker killed mid-map is replaced and the chunks already committed are not
asked (nor billed) again; results repeated across chunks are kept once; a request that
fails for good flags the document, naming the pages it left unread."""

from __future__ import annotations

import json
import re
import signal
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from saga.api.client import SagaClient
from saga.config.settings import Settings
from saga.documents.chunked import app
from saga.state.keys import Keys
from saga.state.model import EventType
from saga.steps.models import ParserOutput
from tests.adapters.support import Reply, Request, Stub, chat_reply, serve
from tests.cli.inspect_support import cli
from tests.executor.conftest import SpawnWorker
from tests.executor.support import saga_and_history, states, wait_until
from tests.executor.test_llm_worker import litellm_libraries
from tests.steps.chunk_support import MARK, answer_json, row_pages

pytestmark = pytest.mark.anyio

STEPS = ("router", "plan", "parse_chunk", "merge", "grouper")
PAGES = 12
SECRET = "Quokka-4411"


def document(tmp_path: Path) -> Path:
    """Twelve pages of twelve rows (page 6 has its rows three times: cut across requests)."""
    pages = []
    for p in range(PAGES):
        rows = row_pages(PAGES)[p]
        pages.append("\n".join(rows * (3 if p == 5 else 1) + [SECRET]))
    path = tmp_path / "long.txt"
    path.write_text("\f".join(pages))
    return path


def answer_of(request: Request) -> Reply:
    return chat_reply(answer_json(str(request.body["messages"][-1]["content"])))


def pages_asked(request: Request) -> tuple[int, ...]:
    return tuple(int(n) for n in MARK.findall(str(request.body["messages"][-1]["content"])))


def env_of(base_env: dict[str, str], stub: Stub, tmp_path: Path, **more: str) -> dict[str, str]:
    env = dict(base_env, SAGA_PIPELINE="saga.documents.chunked:app", SAGA_PARSER="llm",
               SAGA_LLM_API_BASE=f"{stub.url}/v1", SAGA_LLM_API_KEY="sk-test-key",
               SAGA_LLM_MODEL="openai/gpt-4o-mini", SAGA_LLM_MAX_INPUT_TOKENS="3000",
               SAGA_LLM_MAX_TOKENS="750", SAGA_DOCUMENT_ROOTS=str(tmp_path),
               SAGA_PARSE_CHUNK_MAP_CONCURRENCY="3", SAGA_PARSE_CHUNK_LEASE="4",
               SAGA_PARSE_CHUNK_BACKOFF="0.1")  # fmt: skip
    env.update(more)
    return env


@pytest.fixture
def client(redis: Any, keys: Keys) -> SagaClient:
    return SagaClient(redis, keys, app.pipeline(Settings()), Settings())


async def ended(redis: Any, keys: Keys, rid: str, within: float = 120) -> None:
    async def done() -> bool:
        return (await states(redis, keys, [rid]))[0] in ("completed", "failed")

    await wait_until(done, within=within, what=f"{rid} to end", every=0.1)


def parsed(saga: Any) -> ParserOutput:
    return msgspec.json.decode(saga.outputs["merge"], type=ParserOutput)


def item_commits(events: list[Any]) -> list[Any]:
    return [e for e in events if e.event == EventType.COMMITTED and e.step == "parse_chunk"]


@pytest.fixture
def model() -> Iterator[tuple[Stub, threading.Event, list[tuple[int, ...]]]]:
    """The model; requests past the first three wait for ``gate`` (the test kills the
    worker while they do)."""
    gate, asked, lock = threading.Event(), [], threading.Lock()

    def handler(request: Request) -> Reply:
        with lock:
            asked.append(pages_asked(request))
            n = len(asked)
        if n > 3:
            gate.wait(60)
        return answer_of(request)

    with serve(handler) as stub:
        yield stub, gate, asked


async def test_a_long_document_is_one_attempt_per_chunk_and_survives_a_kill(
    spawn: SpawnWorker, base_env: dict[str, str], redis: Any, keys: Keys, tmp_path: Path,
    redis_url: str,
    client: SagaClient, model: tuple[Stub, threading.Event, list[tuple[int, ...]]],
) -> None:  # fmt: skip
    """Twelve pages over a 250-token budget: N >= 6 items, each committed once as its own
    attempt with its own history row and cost; the worker is SIGKILLed while three items
    wait on the model; a new worker finishes the map without asking a committed chunk
    again, the cost is counted once per chunk, every row is found once on its page, the
    diagnosis all chunks repeat is kept once, ``saga show`` has a row per item, and no page
    text reaches a log line."""
    stub, gate, asked = model
    env = env_of(base_env, stub, tmp_path)
    first = spawn(*STEPS, env=env)
    await first.wait_ready()
    rid = f"long-{uuid.uuid4().hex[:8]}"
    await client.start(rid, "u1", document=str(document(tmp_path)))

    async def three_committed_three_waiting() -> bool:
        _, events = await saga_and_history(redis, keys, rid)
        return len(item_commits(events)) == 3 and len(asked) == 6

    await wait_until(three_committed_three_waiting, within=90, what="3 items done, 3 asked",
                     on_timeout=first.tail)  # fmt: skip
    first.signal(signal.SIGKILL)
    assert await first.wait_exit(within=30) != 0
    _, events = await saga_and_history(redis, keys, rid)
    before = {e.item for e in item_commits(events)}
    committed_pages = {asked[i] for i in range(3)}
    gate.set()  # the killed requests' answers go nowhere
    second = spawn(*STEPS, env=env)
    await ended(redis, keys, rid)
    saga, events = await saga_and_history(redis, keys, rid)
    assert saga.state == "completed", (saga.error_message, second.tail())
    [run] = saga.maps
    commits = item_commits(events)
    assert run.items >= 6 and run.done == run.items
    assert sorted(e.item for e in commits) == list(range(run.items))  # each once
    assert before <= {e.item for e in commits}
    for pages in committed_pages:  # committed before the kill: never asked again
        assert asked.count(pages) == 1, (pages, asked)
    assert len(asked) == run.items + 3  # the three killed requests, asked again once
    costs = [e.cost for e in commits]
    assert min(costs) > 0 and saga.costs["parse_chunk"] == pytest.approx(sum(costs))
    assert sum(costs) == pytest.approx(run.items * costs[0])  # once per chunk
    out = parsed(saga)
    found = out.extraction.biomarkers
    assert len(found) == PAGES * 12
    assert {(b.name, b.provenance.page) for b in found if b.provenance} == {
        (f"Analyte {chr(65 + p)}{r}", p + 1) for p in range(PAGES) for r in range(12)
    }
    assert len(out.extraction.diagnoses) == 1
    assert "grouper" in saga.outputs
    assert await redis.exists(keys.pages(rid)) == 0  # merge's commit deleted the blob
    shown = cli(keys, redis_url, "show", rid, env={"SAGA_PIPELINE": "saga.documents.chunked:app"})
    assert shown.returncode == 0, shown.stderr
    assert f"parse_chunk: {run.items} items, {run.items} done" in shown.stdout, shown.stdout
    assert "parse_chunk[0]" in shown.stdout and f"parse_chunk[{run.items - 1}]" in shown.stdout
    for w in (first, second):
        assert SECRET not in w.log.read_text()


async def test_a_chunk_failing_for_good_flags_the_document(
    spawn: SpawnWorker, base_env: dict[str, str], redis: Any, keys: Keys, tmp_path: Path,
    client: SagaClient,
) -> None:  # fmt: skip
    """The model never answers page 4's request with JSON: that item is dead after its
    repair (a PermanentError naming its pages, no page text); the others commit and the
    document completes flagged for review, naming the pages it could not read."""

    def handler(request: Request) -> Reply:
        if re.search(r"=== page 4\b", json.dumps(request.body)):  # the request or its repair
            return chat_reply("I cannot read this.")
        return answer_of(request)

    with serve(handler) as stub:
        spawn(*STEPS, env=env_of(base_env, stub, tmp_path))
        rid = f"bad-{uuid.uuid4().hex[:8]}"
        await client.start(rid, "u1", document=str(document(tmp_path)))
        await ended(redis, keys, rid)
    saga, events = await saga_and_history(redis, keys, rid)
    assert saga.state == "completed", saga.error_message
    [run] = saga.maps
    assert run.failed == 1 and run.done == run.items - 1
    [dead] = [e for e in events if e.event == EventType.DEAD_LETTERED and e.step == "parse_chunk"]
    assert dead.error_class == "PermanentError" and "page" in dead.error_message
    assert SECRET not in dead.error_message and "Analyte" not in dead.error_message
    out = parsed(saga)
    unread = out.review.partition("pages not read: ")[2].partition(";")[0].split(", ")
    assert "4" in unread and len(unread) <= 2
    assert "pages not read" in saga.review.get("merge", ""), saga.review
    assert not any(b.provenance and b.provenance.page == 4 for b in out.extraction.biomarkers)


async def test_sagas_at_the_old_parser_step_finish_after_the_switch(
    spawn: SpawnWorker, base_env: dict[str, str], redis: Any, keys: Keys, tmp_path: Path,
    redis_url: str,
    client: SagaClient,
) -> None:  # fmt: skip
    """Switching a deployment to the chunked pipeline with a saga waiting at ``parser``:
    the chunked workers refuse to start while nothing serves ``parser`` (one sentence,
    exit 2) and ``saga doctor`` names it (exit 1); beside a worker of the default pipeline
    for ``parser`` they start, the old saga finishes through parser -> the chunked app's
    grouper, and a new one through the map: the same extraction (rules) both ways, and
    litellm never loaded."""
    text = "Lab report\nGlucose  95 mg/dL  70 - 99\nSodium  139 mmol/L  135-145\n"
    (tmp_path / "lab.txt").write_text(text)
    default = {k: v for k, v in base_env.items() if k != "SAGA_PIPELINE"}
    default.update(SAGA_PARSER="rules", SAGA_DOCUMENT_ROOTS=str(tmp_path))
    chunked = dict(default, SAGA_PIPELINE="saga.documents.chunked:app")
    for steps in (("parser",), ("router",)):  # the parser's group exists, its workers gone
        old = spawn(*steps, env=default)
        await old.wait_ready()
        if steps == ("parser",):
            old.signal(signal.SIGTERM)
            assert await old.wait_exit(within=30) == 0, old.tail()
    await client.start("at-parser", "u1", document=str(tmp_path / "lab.txt"))

    async def at_parser() -> bool:
        saga, _ = await saga_and_history(redis, keys, "at-parser")
        return "router" in saga.outputs and saga.step == "parser"

    await wait_until(at_parser, within=60, what="the saga to wait at parser", on_timeout=old.tail)
    old.signal(signal.SIGTERM)
    assert await old.wait_exit(within=30) == 0, old.tail()

    refused = spawn(*STEPS, env=chunked)
    assert await refused.wait_exit(within=90) == 2, refused.tail()
    assert "wait at step 'parser', which this release removed" in refused.tail(), refused.tail()

    doctor = cli(keys, redis_url, "doctor", env={"SAGA_PIPELINE": "saga.documents.chunked:app"})
    assert doctor.returncode == 1 and "'parser'" in doctor.stdout, doctor.stdout + doctor.stderr

    keeper = spawn("parser", env=default)
    await keeper.wait_ready()
    fresh = spawn(*STEPS, env=chunked)
    await client.start("new", "u1", document=str(tmp_path / "lab.txt"))
    await ended(redis, keys, "at-parser")
    await ended(redis, keys, "new")
    was, _ = await saga_and_history(redis, keys, "at-parser")
    now, _ = await saga_and_history(redis, keys, "new")
    assert (was.state, now.state) == ("completed", "completed"), (
        was.error_message,
        now.error_message,
    )
    assert "parser" in was.outputs and "merge" not in was.outputs and "grouper" in was.outputs
    assert "parser" not in now.outputs and "merge" in now.outputs and now.maps[0].items == 1
    assert now.outputs["merge"] == was.outputs["parser"]
    assert now.outputs["grouper"] == was.outputs["grouper"]
    assert litellm_libraries(fresh) == []  # the offline path never loads litellm
