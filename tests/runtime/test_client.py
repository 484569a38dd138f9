"""The API client: start, get, history, retry and cancel over the same scripts."""

from __future__ import annotations

from typing import Any

import pytest

from saga.client import SagaClient
from saga.runtime import document_pipeline
from saga.settings import load_settings
from saga.state.keys import Keys
from saga.state.model import FailAction
from saga.state.requests import CommitRequest, FailRequest
from tests.state.helpers import claim_next

pytestmark = pytest.mark.anyio


def client(redis: Any, keys: Keys) -> SagaClient:
    settings = load_settings({"SAGA_DATA_DIR": "/tmp/unused"})
    return SagaClient(redis, keys, document_pipeline(settings), settings)


async def test_start_get_history_cancel(redis: Any, keys: Keys) -> None:
    """start is idempotent; get and history read it back; cancel ends it."""
    sagas = client(redis, keys)
    assert (await sagas.start("mr-1", "u-1", document="/d.pdf")).created
    assert not (await sagas.start("mr-1", "u-1")).created
    saga = await sagas.get("mr-1")
    assert (saga.user_id, saga.step, saga.document) == ("u-1", "router", "/d.pdf")
    assert [e.event.value for e in await sagas.history("mr-1")] == ["started"]
    assert await sagas.cancel("mr-1") == "pending"
    assert (await sagas.get("mr-1")).state == "cancelled"


async def test_retry_from_parser_after_pages_expired_goes_back_to_router(
    redis: Any, keys: Keys
) -> None:
    """Once the parser's commit deleted the pages, a retry from the parser re-runs the router."""
    sagas = client(redis, keys)
    await sagas.start("mr-1", "u-1")
    router = await claim_next(sagas.sm, "router", "w1")
    await sagas.sm.commit(router, CommitRequest(output=b"{}", next_step="parser", pages=b"[]"))
    parser = await claim_next(sagas.sm, "parser", "w1")
    await sagas.sm.commit(parser, CommitRequest(output=b"{}", next_step="grouper",
                                                delete_pages=True))  # fmt: skip
    res = await sagas.retry("mr-1", step="parser")
    assert res.step == "router" and res.epoch == 2
    assert (await sagas.get("mr-1")).step == "router"


async def test_retry_from_parser_with_pages_stays_at_parser(redis: Any, keys: Keys) -> None:
    """A saga dead-lettered at the parser, pages still there, re-runs from the parser."""
    sagas = client(redis, keys)
    await sagas.start("mr-1", "u-1")
    router = await claim_next(sagas.sm, "router", "w1")
    await sagas.sm.commit(router, CommitRequest(output=b"{}", next_step="parser", pages=b"[]"))
    parser = await claim_next(sagas.sm, "parser", "w1")
    await sagas.sm.fail(parser, FailRequest(action=FailAction.DEAD, error_class="E",
                                            error_message="bad"))  # fmt: skip
    res = await sagas.retry("mr-1")
    assert res.step == "parser"
    assert (await sagas.get("mr-1")).state == "pending"
