"""Sagas in the states the console tests need, driven through the real scripts."""

from __future__ import annotations

import msgspec

from saga.state.machine import StateMachine
from saga.state.model import FailAction
from saga.state.requests import CommitRequest
from tests.cli.inspect_support import commit, fail, run_to_dead, start
from tests.cli.test_review import REASON, parser_output
from tests.state.helpers import claim_next

SECRET_DOC = "/records/Jane-Doe-1970-03-14/report.pdf"
"""A document path that names a patient: it must never reach a URL, a log or a viewer."""
NAME_IN_OUTPUT = "Jane-Doe-1970-03-14-report.pdf"
"""The router's output names the document too (operators see outputs, viewers do not)."""
PATIENT = "Jane-Doe"


async def completed(sm: StateMachine, rid: str, user: str, *, cost: float = 0.0) -> None:
    await start(sm, rid, user)
    for step in ("router", "parser", "grouper"):
        await commit(sm, step, cost=cost if step == "grouper" else 0.0)


async def flagged(sm: StateMachine, rid: str, user: str, document: str = SECRET_DOC) -> None:
    """Completed, with the parser's output flagged for review (and a patient's document)."""
    doc = msgspec.json.encode({"document": document})
    await sm.start(rid, user, "router", input_json=doc, document=document)
    c = await claim_next(sm, "router", "w1")
    out = msgspec.json.encode({"document_name": NAME_IN_OUTPUT, "page_count": 2})
    req = CommitRequest(output=out, next_step="parser", worker="w1", pages=b'["page"]')
    assert (await sm.commit(c, req)).code.name == "OK"
    c = await claim_next(sm, "parser", "w1")
    req = CommitRequest(output=parser_output(), next_step="grouper", delete_pages=True,
                        review=REASON)  # fmt: skip
    assert (await sm.commit(c, req)).code.name == "OK"
    await commit(sm, "grouper")


async def dead(sm: StateMachine, rid: str, user: str, step: str = "parser") -> None:
    """Dead-lettered at ``step`` with ``ParseError: no table in <rid>``."""
    await run_to_dead(sm, rid, step, user)


async def waiting(sm: StateMachine, rid: str, user: str) -> None:
    """Failed once at the router and waiting for its retry."""
    await start(sm, rid, user)
    await fail(sm, "router", FailAction.RETRY)


async def budget_parked(sm: StateMachine, rid: str, user: str, *, cost: float = 0.0) -> None:
    """Parked at the router for the user's budget (as a worker parks it), the attempt
    billed ``cost`` (the user's spend)."""
    from saga.state.budgets import BUDGET_ERROR
    from saga.state.requests import FailRequest

    await start(sm, rid, user)
    claim = await claim_next(sm, "router", "w1")
    park = FailRequest(action=FailAction.PARK, error_class=BUDGET_ERROR, worker="w1",
                       error_message="budget spent", delay_ms=3_600_000, cost=cost)  # fmt: skip
    assert (await sm.fail(claim, park)).code.name == "OK"
