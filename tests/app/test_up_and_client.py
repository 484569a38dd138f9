"""``saga up module:app ...`` runs every step of several saga types; ``app.client()``
checks the first input before anything is written."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest

from saga.api.client import SagaClient
from saga.config.settings import Settings
from saga.state.keys import Keys
from tests.app import apps
from tests.executor.support import REPO, states, wait_until

pytestmark = pytest.mark.anyio


def _spawn_up(apps_: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with open(log, "wb") as out:
        return subprocess.Popen([sys.executable, "-m", "saga.cli.main", "up", *apps_], cwd=REPO,
                                env=env, stdout=out, stderr=subprocess.STDOUT)  # fmt: skip


async def test_up_runs_every_step_of_two_apps(
    base_env: dict[str, str], settings: Settings, redis: Any, tmp_path: Path
) -> None:
    """One process per (type, step), logs prefixed type/step; Ctrl-C drains all, exit 0."""
    log = tmp_path / "up.log"
    up = _spawn_up(["tests.app.apps:orders", "tests.app.apps:refunds"], base_env, log)
    try:
        async with apps.orders.client(settings) as orders, apps.refunds.client(settings) as refunds:
            await orders.start("o-1", "u1", input=apps.Order(sku="a", qty=1))
            await refunds.start("o-1", "u1", input=apps.Refund(order="a", cents=5))

            async def done() -> bool:
                assert up.poll() is None, log.read_text()
                found = await states(redis, orders.keys, ["o-1"])
                return found + await states(redis, refunds.keys, ["o-1"]) == ["completed"] * 2

            await wait_until(done, within=90, what="a saga of each type to complete")
        up.send_signal(signal.SIGINT)
        assert up.wait(timeout=90) == 0, log.read_text()
    finally:
        if up.poll() is None:
            up.kill()
    text = log.read_text()
    names = ["orders/router", "orders/charge", "orders/ship", "refunds/router", "refunds/pay_back"]
    for name in names:
        assert re.search(rf"^{re.escape(name)}-1 +\| ", text, re.M), name
    assert text.count("worker_stopped") == len(names)


async def test_start_checks_the_input_against_the_first_step(
    settings: Settings, redis: Any, keys: Keys
) -> None:
    """An input the first step cannot decode is refused in one sentence; nothing is written."""
    sagas = SagaClient(redis, keys, apps.orders.build(), settings)
    assert sagas.keys == keys.of_type("orders")
    with pytest.raises(ValueError, match=r"does not fit step 'router', which takes Order: "):
        await sagas.start("bad-1", "u1", input=apps.Refund(order="x", cents=1))
    with pytest.raises(ValueError, match="not both"):
        await sagas.start("bad-2", "u1", document="a.pdf", input=apps.Order(sku="a", qty=1))
    assert await redis.exists(sagas.keys.saga("bad-1")) == 0
    raw = msgspec.json.encode({"sku": "a", "qty": 2})
    res = await sagas.start("ok-1", "u1", input=raw)
    assert res.created and res.step == "router"
    registered = await redis.hget(keys.types_registry(), "orders")
    assert msgspec.json.decode(registered)["steps"] == ["router", "charge", "ship"]
