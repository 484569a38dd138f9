"""Scripts sent together in one write (``evalsha_many``): the commits' path."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from redis.exceptions import ClusterDownError, ResponseError

from saga.state import scripts
from saga.state.codes import RC
from saga.state.machine import StateMachine
from saga.state.model import FailAction
from saga.state.requests import CommitRequest, FailRequest
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

    async def second_refused_once(client: Any, calls: Any, **kw: Any) -> list[Any]:
        sends.append(len(calls))
        if len(sends) == 1:
            first = await real(client, calls[:1], **kw)
            return [*first, ClusterDownError("The cluster is down")]
        return await real(client, calls, **kw)

    await scripts.ensure_loaded(sm.client)  # sends are counted: no NOSCRIPT re-send
    monkeypatch.setattr(scripts, "_pipeline", second_refused_once)
    req = CommitRequest(output=b"{}", next_step="parser", worker="w-a")
    fail = FailRequest(
        action=FailAction.RETRY, error_class="Boom", error_message="x", delay_ms=5, worker="w-a"
    )
    outcomes = await sm.finish_many([(claims[0], req), (claims[1], fail)])
    assert sends == [2, 2]  # the commit's call, then the fail's
    assert [o.code for o in outcomes] == [RC.DUPLICATE, RC.OK]
    assert [o.state for o in outcomes] == ["pending", "waiting_retry"]


async def test_commits_of_a_partition_share_one_call_and_each_gets_its_reply(
    sm: StateMachine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Commits of one partition go in one commit_steps call; a stale one among them is
    refused alone, and the others commit."""
    for rid in ("r1", "r2", "r3"):
        await sm.start(rid, "u1", "router")
    claims = [await claim_next(sm, "router", "w-a") for _ in range(3)]
    stale = msgspec.structs.replace(claims[1], token=claims[1].token + "0")
    real, sends = scripts._pipeline, []

    async def counted(client: Any, calls: Any, **kw: Any) -> list[Any]:
        sends.append([name for name, _, _ in calls])
        return await real(client, calls, **kw)

    monkeypatch.setattr(scripts, "_pipeline", counted)
    items = [
        (claims[0], CommitRequest(output=b"{}", next_step="parser", worker="w-a")),
        (stale, CommitRequest(output=b"{}", next_step="parser", worker="w-a")),
        (claims[2], CommitRequest(output=b"{}", worker="w-a")),
    ]
    outcomes = await sm.finish_many(items)
    assert sends == [["commit_steps"]]
    assert [(o.code, o.state) for o in outcomes] == [
        (RC.OK, "pending"),
        (RC.LEASE_LOST, "running"),
        (RC.OK, "completed"),
    ]
    assert await sm.client.hget(sm.keys.stats(0), "committed:router") == b"2"
