"""The API client: start, get, history, retry and cancel over the same scripts."""

from __future__ import annotations

from typing import Any

import pytest

from saga.api.client import SagaClient
from saga.config.settings import load_settings
from saga.state.keys import Keys
from saga.state.model import FailAction
from saga.state.requests import CommitRequest, FailRequest
from saga.wiring.runtime import document_pipeline
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


async def test_budgets_through_the_client(redis: Any, keys: Keys) -> None:
    """set_budget / budget / budgets / clear_budget: the status carries limits and spend;
    raising a budget wakes the user's budget-parked saga; a budget needs a limit."""
    from saga.state.errors import InvalidIdError

    sagas = client(redis, keys)
    await sagas.start("mr-b", "u-9")
    claim = await claim_next(sagas.sm, "router", "w")
    spent = FailRequest(action=FailAction.PARK, error_class="BudgetExceededError",
                        error_message="spent", delay_ms=3_600_000, cost=0.02)  # fmt: skip
    await sagas.sm.fail(claim, spent)
    status = await sagas.set_budget("u-9", daily=0.01)
    assert (status.daily_usd, status.monthly_usd, status.exceeded) == (0.01, None, "daily")
    assert status.spent_today_usd == status.spent_month_usd == 0.02
    assert (await sagas.get("mr-b")).parked_reason == "budget"  # still spent: not woken
    raised = await sagas.set_budget("u-9", daily=1.0, monthly=10.0)
    assert raised.exceeded == "" and (await sagas.get("mr-b")).state == "pending"
    assert [s.user_id for s in await sagas.budgets()] == ["u-9"]
    assert await sagas.clear_budget("u-9") and not await sagas.clear_budget("u-9")
    assert (await sagas.budget("u-9")).daily_usd is None
    with pytest.raises(InvalidIdError, match="needs a daily or a monthly limit"):
        await sagas.set_budget("u-9")
