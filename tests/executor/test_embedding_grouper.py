"""The document pipeline in a real worker, grouping by embeddings from a local
OpenAI-compatible server with each user's key from a billing service: the cost is in
the saga and in `saga costs`, the same names are never paid twice, and an open
breaker or a dead server leaves the offline groups without failing the saga; an
embedding outage opens the `embedding` breaker, never the parser's `llm` one."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest

from saga.adapters.breaker import (
    EMBEDDING,
    LLM,
    BreakerPolicy,
    BreakerState,
    CircuitBreaker,
    read_all,
)
from saga.api.client import SagaClient
from saga.config.settings import Settings
from saga.state.keys import Keys
from saga.steps.models import GrouperOutput, JoinedBy
from saga.wiring.runtime import document_pipeline
from tests.adapters.support import (
    Reply,
    Request,
    embeddings_reply,
    error_reply,
    free_port,
    reading_model,
    serve,
)
from tests.cli.inspect_support import cli_json
from tests.executor.conftest import SpawnWorker
from tests.executor.support import saga_and_history, wait_completed

pytestmark = pytest.mark.anyio

MODEL = "openai/text-embedding-3-small"
REPORT = (
    "Lab report\n"
    "Selen  110 ug/L  50 - 150\n"
    "Zinc  95 ug/dL  70 - 120\n"
    "Selenium  100 ug/L  50 - 150\n"
    "Zink  90 ug/dL  70 - 120\n"
    "Glucose  95 mg/dL  70 - 99\n"
)


def provider(request: Request) -> Reply:
    """Billing (a key per user) and embeddings on one local server."""
    if request.path.startswith("/users/"):
        user = request.path.removeprefix("/users/").removesuffix("/key")
        return Reply(200, {"key": f"sk-{user}"})
    return embeddings_reply(request)


def worker_env(base_env: dict[str, str], tmp_path: Path, url: str, **more: str) -> dict[str, str]:
    env = {k: v for k, v in base_env.items() if k != "SAGA_PIPELINE"}  # the document pipeline
    env.update(
        SAGA_BILLING_URL=url,
        SAGA_LLM_API_BASE=f"{url}/v1",
        SAGA_GROUPER_EMBEDDING_MODEL=MODEL,
        SAGA_GROUPER_EMBEDDING_THRESHOLD="0.65",
        SAGA_DOCUMENT_ROOTS=str(tmp_path),
        SAGA_BREAKER_FAILURES="1",
        SAGA_BREAKER_COOLDOWN="600",
        # the first embedding call imports litellm (seconds; more on a loaded machine)
        SAGA_GROUPER_TIMEOUT="120",
        **more,
    )
    return env


async def run_saga(
    redis: Any, keys: Keys, user: str, document: Path
) -> tuple[GrouperOutput, dict[str, float]]:
    """The grouper's output and the saga's cost per step, once the saga completed."""
    sagas = SagaClient(redis, keys, document_pipeline(Settings()), Settings())
    rid = f"emb-{uuid.uuid4().hex[:8]}"
    await sagas.start(rid, user, document=str(document))
    await wait_completed(redis, keys, rid, within=120)
    saga, _ = await saga_and_history(redis, keys, rid)
    return msgspec.json.decode(saga.outputs["grouper"], type=GrouperOutput), dict(saga.costs)


def members(output: GrouperOutput) -> list[list[str]]:
    return [g.members for g in output.groups]


async def test_embeddings_group_bill_the_user_and_are_paid_once(
    spawn: SpawnWorker,
    base_env: dict[str, str],
    redis: Any,
    redis_url: str,
    keys: Keys,
    tmp_path: Path,
) -> None:
    """u1's saga pays for the names with u1's key, shown in the saga and `saga costs`;
    u2's saga with the same names calls nothing and pays nothing; with the breaker open
    a third saga completes with the offline groups and says why."""
    document = tmp_path / "report.txt"
    document.write_text(REPORT)
    with serve(provider) as stub:
        worker = spawn("router", "parser", "grouper", env=worker_env(base_env, tmp_path, stub.url))
        await worker.wait_ready()
        first, first_costs = await run_saga(redis, keys, "u1", document)
        calls = [r for r in stub.requests if r.path.endswith("/embeddings")]
        assert [r.bearer for r in calls] == ["sk-u1"]
        assert members(first) == [["Selen", "Selenium"], ["Zinc"], ["Zink"], ["Glucose"]]
        joined = first.groups[0].sources[1]
        assert (joined.joined_by, joined.matched) == (JoinedBy.EMBEDDING, "Selen")
        assert first.embedding_model == MODEL and first_costs["grouper"] > 0

        second, second_costs = await run_saga(redis, keys, "u2", document)
        assert stub.count("/v1/embeddings") == 1  # counted at the server: nothing new paid
        assert members(second) == members(first) and "grouper" not in second_costs

        costs = await anyio.to_thread.run_sync(cli_json, keys, redis_url, "costs")  # `saga costs`
        rows = {(r["user_id"], r["step"]): r["usd"] for r in costs["rows"]}
        assert rows == {("u1", "grouper"): pytest.approx(first_costs["grouper"])}

        breaker = CircuitBreaker(redis, keys, EMBEDDING, BreakerPolicy(failures=1, cooldown_s=600))
        await breaker.record_failure()
        other = tmp_path / "other.txt"
        other.write_text(REPORT.replace("Selenium", "Selenum i.S.").replace("Selen ", "Se "))
        third, _ = await run_saga(redis, keys, "u1", other)
        assert stub.count("/v1/embeddings") == 1
        assert third.embedding_model == "" and "circuit embedding open" in third.warnings[0]


async def test_a_dead_embedding_server_leaves_offline_groups(
    spawn: SpawnWorker, base_env: dict[str, str], redis: Any, keys: Keys, tmp_path: Path
) -> None:
    """Nothing listens at the embedding API: the saga completes, grouped offline, with
    the reason in the grouper's output, and nothing is billed for the grouper."""
    document = tmp_path / "report.txt"
    document.write_text(REPORT)
    with serve(provider) as billing:
        env = worker_env(
            base_env,
            tmp_path,
            billing.url,
            SAGA_GROUPER_EMBEDDING_API_BASE=f"http://127.0.0.1:{free_port()}/v1",
        )
        worker = spawn("router", "parser", "grouper", env=env)
        await worker.wait_ready()
        output, costs = await run_saga(redis, keys, "u1", document)
    assert members(output) == [["Selen"], ["Zinc"], ["Selenium"], ["Zink"], ["Glucose"]]
    assert output.embedding_model == "" and "RetryableError" in output.warnings[0]
    assert "grouper" not in costs


def embeddings_down(request: Request) -> Reply:
    """Billing and a reading chat model answer; the embeddings API is down (503)."""
    if request.path.endswith("/embeddings"):
        return error_reply(503, "embeddings down")
    if request.path.endswith("/chat/completions"):
        return reading_model(request)
    return provider(request)


async def test_an_embedding_outage_opens_its_own_breaker_and_parsing_goes_on(
    spawn: SpawnWorker, base_env: dict[str, str], redis: Any, keys: Keys, tmp_path: Path
) -> None:
    """The embeddings API answers 503: the first saga groups offline and opens the
    `embedding` breaker; the next saga's parser still calls the LLM (`llm` stays closed)
    and its grouper, refused by the open circuit, groups offline without a request."""
    document = tmp_path / "report.txt"
    document.write_text(REPORT)
    offline = [["Selen"], ["Zinc"], ["Selenium"], ["Zink"], ["Glucose"]]
    with serve(embeddings_down) as stub:
        env = worker_env(base_env, tmp_path, stub.url, SAGA_PARSER="llm", SAGA_PARSER_TIMEOUT="120")
        worker = spawn("router", "parser", "grouper", env=env)
        await worker.wait_ready()
        first, _ = await run_saga(redis, keys, "u1", document)
        assert members(first) == offline
        assert first.embedding_model == "" and "RetryableError" in first.warnings[0]
        chats, embeds = stub.count("/v1/chat/completions"), stub.count("/v1/embeddings")
        assert chats >= 1 and embeds >= 1

        second, _ = await run_saga(redis, keys, "u2", document)
        assert stub.count("/v1/chat/completions") > chats  # the parser's LLM call went out
        assert stub.count("/v1/embeddings") == embeds  # refused by the open circuit
        assert members(second) == offline and "circuit embedding open" in second.warnings[0]
    breakers = await read_all(redis, keys, [LLM, EMBEDDING])
    assert breakers[EMBEDDING].state is BreakerState.OPEN
    assert (breakers[LLM].state, breakers[LLM].failures) == (BreakerState.CLOSED, 0)
