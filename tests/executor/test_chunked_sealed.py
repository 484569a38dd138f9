"""The chunked document pipeline (``saga.documents.chunked``, a map) under
``SAGA_DATA_KEY``, with real workers, a real server and a local model: the plan (the
map's list) and each chunk's result are sealed in Redis, the document completes with its
results, and no value under the keyspace holds the document's marker in clear."""

from __future__ import annotations

import base64
import dataclasses
import os
import uuid
from pathlib import Path
from typing import Any

import pytest

from saga.api.client import SagaClient
from saga.config.settings import Settings
from saga.documents.chunked import app
from saga.state.keys import Keys
from saga.state.sealing import Sealer
from tests.adapters.support import serve
from tests.app.test_map_sealed import _in_clear
from tests.executor.conftest import SpawnWorker
from tests.executor.support import saga_and_history
from tests.executor.test_chunked_documents import (
    SECRET,
    STEPS,
    answer_of,
    document,
    ended,
    env_of,
    item_commits,
    parsed,
)

pytestmark = pytest.mark.anyio


async def test_a_long_document_is_parsed_in_chunks_sealed(
    spawn: SpawnWorker, base_env: dict[str, str], redis: Any, keys: Keys, tmp_path: Path
) -> None:
    """Every chunk commits once, merge reads the sealed fan-in and the sealed plan, the
    saga completes with biomarkers; the marker of the pages is nowhere in clear."""
    raw = os.urandom(32)
    sealed = dataclasses.replace(keys, sealer=Sealer(raw))
    client = SagaClient(redis, sealed, app.pipeline(Settings()), Settings())
    with serve(answer_of) as stub:
        key = base64.b64encode(raw).decode()
        spawn(*STEPS, env=env_of(base_env, stub, tmp_path, SAGA_DATA_KEY=key))
        rid = f"sealed-{uuid.uuid4().hex[:8]}"
        await client.start(rid, "u1", document=str(document(tmp_path)))
        await ended(redis, keys, rid)
    saga, events = await saga_and_history(redis, sealed, rid)
    assert saga.state == "completed", saga.error_message
    [run] = saga.maps
    assert run.done == run.items > 1 and len(item_commits(events)) == run.items
    assert parsed(saga).extraction.biomarkers
    assert (await redis.hget(keys.saga(rid), "out:parse_chunk")).startswith(b"\x00sgL")
    assert await _in_clear(redis, keys.prefix, SECRET) == []
    assert await _in_clear(redis, keys.prefix, "Analyte") == []  # the chunks' results
