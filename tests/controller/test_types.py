"""The controller serves every registered saga type, not only its own, and stops when
the keyspace's partition count is no longer its SAGA_PARTITIONS. Real `saga controller`
and `saga worker module:app` processes against a real server."""

from __future__ import annotations

import json
import signal
import sys
from typing import Any

import anyio
import pytest

from saga.api.client import SagaClient
from saga.config.settings import Settings
from saga.state.codes import RC
from saga.state.keys import Keys
from saga.state.machine import StateMachine
from saga.state.requests import FailAction, FailRequest
from saga.state.types import register_type
from tests.app import apps
from tests.controller.support import Procs, lag, metric, pending_count
from tests.controller.test_check import check
from tests.controller.test_scale_to_zero import scrape
from tests.executor.support import (
    REPO,
    assert_one_commit_per_step,
    saga_and_history,
    states,
    wait_until,
)
from tests.state.helpers import claim_next, wait_lease_expired

pytestmark = pytest.mark.anyio

N = 4
ORDERS = ("router", "charge", "ship")


async def stranded_orders(redis: Any, keys: Keys) -> tuple[Keys, list[str], list[str]]:
    """Orders sagas (a type the controller has no code for) left by a worker that vanished:
    N waiting for a retry, N whose claim's lease expired with the entry pending."""
    orders = SagaClient(redis, keys, apps.orders.pipeline(), Settings())  # registers the type
    sm = StateMachine(redis, orders.keys)
    waiting, held = [f"retry-{i}" for i in range(N)], [f"held-{i}" for i in range(N)]
    for rid in waiting:
        await orders.start(rid, "buyer", input=apps.Order(sku=rid, qty=1))
        claim = await claim_next(sm, "router", "w-gone")
        req = FailRequest(action=FailAction.RETRY, error_class="E", error_message="m", delay_ms=0)
        assert (await sm.fail(claim, req)).code == RC.OK
    for rid in held:
        await orders.start(rid, "buyer", input=apps.Order(sku=rid, qty=1))
        claim = await claim_next(sm, "router", "w-gone", lease_ms=1)
    await wait_lease_expired(redis, claim.lease_until_ms)
    return orders.keys, waiting, held


async def test_controller_promotes_and_requeues_every_registered_type(
    redis: Any, keys: Keys, base_env: dict[str, str], procs: Procs
) -> None:
    """With no worker of `orders` running, the controller (whose own type is the test
    pipeline) promotes its retries and requeues its stranded entries, with gauges and
    counters labelled saga_type="orders"; an orders worker then finishes each once."""
    ok, waiting, held = await stranded_orders(redis, keys)
    assert await redis.zcard(ok.delayed(0, "router")) == N
    assert await pending_count(redis, ok, "router") == N
    env = {**base_env, "SAGA_ROUTER_LEASE": "1"}  # the lease it assumes for every `router`
    controller = procs.controller(env)
    await controller.wait_ready(within=90)

    async def moved_back() -> bool:
        return (
            await redis.zcard(ok.delayed(0, "router")),
            await lag(redis, ok, "router"),
            await pending_count(redis, ok, "router"),
        ) == (0, 2 * N, 0)

    await wait_until(moved_back, within=30, what="orders' work moved back", on_timeout=procs.tails)
    assert [e["saga_type"] for e in controller.logged("saga_type_found")] == ["orders"]

    async def gauges_say_so() -> bool:
        text = await scrape(controller.port)
        return metric(text, "saga_stream_lag", saga_type="orders", step="router") == 2 * N

    await wait_until(gauges_say_so, within=20, what="the orders gauges", on_timeout=procs.tails)
    text = await scrape(controller.port)
    orders_router = {"saga_type": "orders", "step": "router"}
    assert metric(text, "saga_controller_promoted_total", **orders_router) == N
    assert metric(text, "saga_controller_requeued_total", **orders_router) == N
    assert metric(text, "saga_controller_promoted_total", saga_type="orders", step="ship") == 0
    # The own type's series keep their label value: the default type's name.
    assert metric(text, "saga_stream_lag", saga_type="documents", step="router") == 0
    assert metric(text, "saga_stream_lag", step="router") is not None

    procs.worker(env, "tests.app.apps:orders")
    rids = waiting + held

    async def completed() -> bool:
        return await states(redis, ok, rids) == ["completed"] * len(rids)

    await wait_until(completed, within=60, what="every order completed", on_timeout=procs.tails)
    for rid in rids:
        saga, events = await saga_and_history(redis, ok, rid)
        assert_one_commit_per_step(saga, events, ORDERS)
        kinds = [e.event.value for e in events]
        assert kinds.count("promoted" if rid in waiting else "reclaimed") == 1, kinds
    controller.signal(signal.SIGTERM)
    assert await controller.wait_exit(within=30) == 0


async def test_controller_exits_when_the_partition_count_changes(
    redis: Any, keys: Keys, base_env: dict[str, str], procs: Procs
) -> None:
    """A migration started under a running controller: it stops (exit 2, one sentence)
    rather than look for records in the wrong partitions; started again, it refuses."""
    controller = procs.controller(base_env)
    await controller.wait_ready(within=90)
    assert await redis.hget(keys.partition_count(), "count") == str(keys.partitions).encode()
    await redis.hset(keys.partition_count(), mapping={"to": keys.partitions + 2, "op": "m-1"})
    assert await controller.wait_exit(within=30) == 2
    [refused] = controller.logged("partition_count_changed")
    assert f"being migrated from {keys.partitions} to {keys.partitions + 2}" in refused["error"]
    assert "Traceback" not in controller.tail(200)

    await redis.hset(keys.partition_count(), mapping={"count": keys.partitions + 2, "to": 0})
    again = procs.controller(base_env)
    assert await again.wait_exit(within=60) == 2
    last = again.log.read_text().strip().splitlines()[-1]
    assert last == (
        f"saga: keyspace {keys.prefix!r} has {keys.partitions + 2} partition(s) but "
        f"SAGA_PARTITIONS={keys.partitions}; set SAGA_PARTITIONS={keys.partitions + 2}, or "
        f"move the records with `saga partitions migrate --to {keys.partitions}`."
    )


async def test_check_covers_every_registered_type(
    redis: Any, keys: Keys, base_env: dict[str, str]
) -> None:
    """`saga controller --check` fails while a registered type has no groups, naming its
    streams; `saga init --type` makes them and the check passes, listing the type."""
    init = [sys.executable, "-m", "saga.cli.main", "init"]
    assert (await anyio.run_process(init, cwd=REPO, env=base_env, check=False)).returncode == 0
    await register_type(redis, keys, apps.orders.pipeline().info())
    before = check(base_env, "--json")
    assert before.returncode == 1, before.stderr
    groups = next(c for c in json.loads(before.stdout)["checks"] if c["name"] == "groups")
    assert (
        groups["status"] == "fail" and keys.of_type("orders").ready(0, "router") in groups["detail"]
    )
    typed = await anyio.run_process(
        [*init, "--type", "orders"], cwd=REPO, env=base_env, check=False
    )
    assert typed.returncode == 0
    after = check(base_env, "--json")
    assert after.returncode == 0, after.stdout
    groups = next(c for c in json.loads(after.stdout)["checks"] if c["name"] == "groups")
    assert groups["detail"].endswith(
        "router, parser, grouper, orders/router, orders/charge, orders/ship"
    )
