"""A saga parked for its user's budget reads the same everywhere people look: one name
(``parked (budget)``) and one time format for when it resumes (UTC, to the second)."""

from __future__ import annotations

import re
import time
from typing import Any

import pytest

from saga.api.retry import RetryPolicy, decide
from saga.state.keys import Keys
from saga.state.model import FailAction
from saga.state.requests import FailRequest
from saga.steps.errors import BudgetExceededError
from tests.cli.inspect_support import cli, machine, start
from tests.state.helpers import claim_next

pytestmark = pytest.mark.anyio


async def test_a_budget_parked_saga_has_one_name_and_one_time(
    redis: Any, keys: Keys, redis_url: str
) -> None:
    """show, list and budget show name it `parked (budget)` and give the same resume time,
    UTC to the second; the error message has that time too, not a raw epoch. The worker's
    clock is 7 ms behind the server's, so the due time is 7 ms past the period's start."""
    sm = await machine(redis, keys)
    assert cli(keys, redis_url, "budget", "set", "u-1", "--daily", "0.001").returncode == 0
    await start(sm, "mr-p", "u-1")
    claim = await claim_next(sm, "router", "w1")
    retry_at = (int(time.time()) // 86400 + 1) * 86400  # the next UTC day
    exc = BudgetExceededError("u-1", "daily", 0.0021, 0.001, retry_at)
    d = decide(exc, 1, RetryPolicy(), now=time.time() - 0.007)
    req = FailRequest(action=FailAction.PARK, error_class=d.error_class, cost=0.0021,
                      error_message=d.message, delay_ms=d.delay_ms, worker="w1")  # fmt: skip
    assert (await sm.fail(claim, req)).code.name == "OK"
    resume = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(retry_at))
    env = {"TZ": "America/New_York", "COLUMNS": "200"}  # local time is not UTC here
    show = cli(keys, redis_url, "show", "mr-p", env=env).stdout
    head = dict(re.split(r"\s{2,}", line, maxsplit=1)
                for line in show.split("\n\n")[0].splitlines())  # fmt: skip
    assert head["state"] == "parked (budget)", show
    assert head["resumes"] == resume, show
    assert f"parked until {resume}" in head["error"] and str(retry_at) not in show
    listed = cli(keys, redis_url, "list", env=env).stdout.splitlines()
    assert listed[2].split()[2:4] == ["parked", "(budget)"], listed
    budget = cli(keys, redis_url, "budget", "show", env=env).stdout.splitlines()
    assert budget[2].endswith(f"{resume} (daily)"), budget
