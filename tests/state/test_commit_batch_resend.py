"""A known defect, left for commit_steps' owner (not fixed here): a re-sent commit batch
that carries an older epoch's attempt of a saga, answered DUPLICATE from 'done:<step>',
and the same saga's newer commit at that step, which overwrites 'done:<step>': the
re-send answers the older attempt LEASE_LOST and writes a 'fenced' event and 'fop'
(a re-sent call must write nothing). Found by the model test (commit_together with
resend); strict xfail, so it fails once fixed and is then turned into a plain test."""

from __future__ import annotations

from typing import Any

import pytest

from saga.state import operator
from saga.state.codes import RC
from saga.state.keys import Keys
from saga.state.machine import StateMachine
from saga.state.requests import CommitRequest
from tests.state.helpers import claim_next, snapshot

pytestmark = pytest.mark.anyio


@pytest.mark.xfail(strict=True, reason="commit_steps: done:<step> is per step, not per epoch")
async def test_a_resent_batch_with_an_older_epochs_duplicate_writes_nothing(
    sm: StateMachine, keys: Keys, redis: Any
) -> None:
    """Epoch 1's router attempt committed; cancelled, retried, epoch 2's claimed: a batch
    of both commits, re-sent whole with the same op ids, writes nothing the second time."""
    await sm.start("r0", "u", "router")
    old = await claim_next(sm, "router", "w1")
    req_old = CommitRequest(output=b"{}", next_step="parser", op="op-old")
    assert (await sm.commit(old, req_old)).code == RC.OK
    await operator.cancel(sm, "r0")
    await operator.retry(sm, "r0", "router", "_input")
    new = await claim_next(sm, "router", "w1")
    req_new = CommitRequest(output=b"{}", next_step="parser", op="op-new")
    first = await sm.finish_many([(old, req_old), (new, req_new)])
    assert [o.code for o in first] == [RC.DUPLICATE, RC.OK]
    before = await snapshot(redis, keys.prefix)
    await sm.finish_many([(old, req_old), (new, req_new)])
    assert await snapshot(redis, keys.prefix) == before
