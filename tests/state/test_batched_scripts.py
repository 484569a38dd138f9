"""Scripts sent together in one write (``evalsha_many``): the commits' path."""

from __future__ import annotations

from typing import Any

import pytest
from redis.exceptions import ClusterDownError, ResponseError

from saga.state import scripts
from saga.state.codes import RC
from saga.state.machine import StateMachine
from saga.state.requests import CommitRequest
from saga.state.scripts import evalsha_many
from tests.state.helpers import claim_next

pytestmark = pytest.mark.anyio


async def test_a_batch_after_script_flush_loads_the_scripts_and_runs_every_call(
    sm: StateMachine,
) -> None:
    """NOSCRIPT replies did not run: the scripts are loaded and those calls sent again."""
    for rid in ("r1", "r2"):
        await sm.start(rid, "u1", "router")
    claims = [await claim_next(sm, "router", "w-a") for _ in range(2)]
    await sm.client.script_flush()
    req = CommitRequest(output=b"{}", next_step="parser", worker="w-a")
    outcomes = await sm.finish_many([(c, req) for c in claims])
    assert [o.code for o in outcomes] == [RC.OK, RC.OK]
    assert [o.state for o in outcomes] == ["pending", "pending"]


async def test_an_error_reply_takes_its_place_and_the_connection_stays_usable(
    sm: StateMachine,
) -> None:
    await sm.client.set("not-a-hash", "x")
    calls = [
        ("claim_steps", ["not-a-hash"], ["bad"]),  # wrong arguments: the script errors
        ("quarantine_entry", [], []),
    ]
    replies = await evalsha_many(sm.client, calls)
    assert all(isinstance(r, ResponseError) for r in replies), replies
    assert await sm.client.ping() is True  # nothing left unread on the pooled socket
    await sm.start("r3", "u1", "router")
    claim = await claim_next(sm, "router", "w-a")
    [ok] = await sm.finish_many([(claim, CommitRequest(output=b"{}", worker="w-a"))])
    assert ok.code == RC.OK and ok.state == "completed"


async def test_a_call_refused_for_an_outage_resends_the_batch(
    sm: StateMachine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cluster pipeline returns CLUSTERDOWN in place of a refused call; the batch is
    sent again (the call that ran answers as a duplicate) instead of the refusal
    reaching its attempt as an error."""
    for rid in ("r1", "r2"):
        await sm.start(rid, "u1", "router")
    claims = [await claim_next(sm, "router", "w-a") for _ in range(2)]
    real, sends = scripts._pipeline, []

    async def second_refused_once(client: Any, calls: Any) -> list[Any]:
        sends.append(len(calls))
        if len(sends) == 1:
            first = await real(client, calls[:1])
            return [*first, ClusterDownError("The cluster is down")]
        return await real(client, calls)

    monkeypatch.setattr(scripts, "_pipeline", second_refused_once)
    req = CommitRequest(output=b"{}", next_step="parser", worker="w-a")
    outcomes = await sm.finish_many([(c, req) for c in claims])
    assert sends == [2, 2]
    assert [o.code for o in outcomes] == [RC.DUPLICATE, RC.OK]
