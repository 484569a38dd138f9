"""The saga pages of the new shapes in a real headless Chromium, as each role sees them:
a saga running a map (its items' rows), one waiting for a signal and one sleeping on a
timer fit 1360 px without a sideways scroll and, at 390 px, scroll only inside their
tables' boxes; each says what it is doing. Screenshots go to tmp/artefacts/console."""

from __future__ import annotations

import time
from typing import Any

import pytest

from saga.console.tokens import Role, add_stored_token
from saga.state.keys import Keys
from saga.state.machine import StateMachine
from saga.state.model import FailAction
from saga.state.requests import CommitRequest, FailRequest
from saga.state.streams import ensure_groups
from tests.console.browser import shot
from tests.console.support import RunningConsole, console_signer
from tests.console.test_browser_parity import browser, overflow, signed_in
from tests.console.test_map_page import PLAN, _claim_items
from tests.console.test_shapes_page import _parked
from tests.state.helpers import claim_next

pytestmark = pytest.mark.anyio
__all__ = ["browser"]  # the fixture, imported to be used here

SAYS = {
    "/sagas/sh-map": "Map parser: 3 items",
    "/sagas/sh-wait": "Waiting at parser for the signal approved",
    "/sagas/sh-sleep": "Sleeping at parser",
}


async def shapes(sm: StateMachine) -> None:
    """A map of three items (one done, one waiting to retry, one pending), a wait for
    'approved' and a sleep until 2100."""
    await ensure_groups(sm.client, sm.keys, ["router", "parser", "grouper"])
    await _parked(sm, "sh-wait", "approved", 0)  # first: the map leaves parser entries
    await _parked(sm, "sh-sleep", "", 4_102_444_800_000)  # 2100-01-01
    sm.maps["parser"] = PLAN
    await sm.start("sh-map", "u1", "router")
    c = await claim_next(sm, "router", "w-a")
    await sm.commit(c, CommitRequest(output=b"[{}, {}, {}]", next_step="parser"))
    assert await _claim_items(sm) == []  # the spawn
    a, b = await _claim_items(sm)
    await sm.commit(a, CommitRequest(output=b"{}"))
    error = "the provider answered 503 three times"
    retry = FailRequest(action=FailAction.RETRY, error_class="ProviderUnavailableError",
                        error_message=error, delay_ms=60_000)  # fmt: skip
    await sm.fail(b, retry)


async def test_map_wait_and_sleep_pages_fit_for_every_role(
    redis: Any, keys: Keys, sm: StateMachine, console: RunningConsole,
    tokens: dict[Role, str], browser: Any,
) -> None:  # fmt: skip
    await shapes(sm)
    now = int(time.time() * 1000)
    roles = dict(tokens)
    roles[Role.REVIEWER] = await add_stored_token(
        redis, keys, "ann", Role.REVIEWER, signer=console_signer(), now_ms=now
    )
    for role, token in roles.items():
        for width in (1360, 390):
            page = await signed_in(browser, console, token, width)
            for path, said in SAYS.items():
                res = await page.goto(console.url + path)
                assert res.status == 200, (role, path)
                assert said in await page.inner_text("main"), (role, path)
                got = await overflow(page)
                assert got["page"] <= got["window"] <= width, (role, path, width, got)
                if width == 1360:
                    assert got["boxes"] == 0, (role, path, got)
                await shot(page, f"shapes-{role}-{width}{path.replace('/', '-')}")
            await page.context.close()
