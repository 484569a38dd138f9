"""Two saga types in one Redis, both with a step named ``router``: real ``saga worker
module:app`` processes, a real server, the same record ids in both types."""

from __future__ import annotations

import json
from typing import Any

import pytest

from saga.config.settings import Settings
from saga.state.keys import Keys
from saga.state.model import EventType
from tests.app import apps
from tests.cli.inspect_support import cli, cli_json
from tests.executor.conftest import SpawnWorker
from tests.executor.support import assert_one_commit_per_step, saga_and_history, states, wait_until

pytestmark = pytest.mark.anyio

ORDERS = ("router", "charge", "ship")
REFUNDS = ("router", "pay_back")


async def test_two_types_sharing_step_names_do_not_interfere(
    spawn: SpawnWorker, settings: Settings, redis: Any, keys: Keys, redis_url: str
) -> None:
    """Each type's sagas run only its own code, by its own workers, in its own keys."""
    orders_worker = spawn("tests.app.apps:orders")  # every step of the app
    refunds_worker = spawn("tests.app.apps:refunds", "router", "pay_back")
    rids = [f"r-{i}" for i in range(8)]
    async with apps.orders.client(settings) as orders, apps.refunds.client(settings) as refunds:
        for i, rid in enumerate(rids):
            await orders.start(rid, "buyer", input=apps.Order(sku=f"sku-{i}", qty=i * 3))
            await refunds.start(rid, "payee", input=apps.Refund(order=f"o-{i}", cents=i))
        await orders_worker.wait_ready()
        await refunds_worker.wait_ready()
        ok, rk = orders.keys, refunds.keys

        async def done() -> bool:
            both = await states(redis, ok, rids) + await states(redis, rk, rids)
            return both == ["completed"] * (2 * len(rids))

        await wait_until(done, within=90, what="both types' sagas to complete", every=0.05)
    for rid in rids:
        for k, steps, worker, user in (
            (ok, ORDERS, orders_worker, "buyer"),
            (rk, REFUNDS, refunds_worker, "payee"),
        ):
            saga, events = await saga_and_history(redis, k, rid)
            assert_one_commit_per_step(saga, events, steps)
            assert saga.user_id == user
            assert all(worker.owns(e.worker) for e in events if e.event == EventType.COMMITTED)
        order_trail = json.loads((await saga_and_history(redis, ok, rid))[0].outputs["ship"])
        refund_trail = json.loads((await saga_and_history(redis, rk, rid))[0].outputs["pay_back"])
        assert order_trail["trail"] == ["orders/router", "orders/charge", "orders/ship"]
        assert refund_trail["trail"] == ["refunds/router", "refunds/pay_back"]
    assert await redis.exists(keys.saga(rids[0])) == 0  # the default type saw nothing

    # The operator's view of each type, from the CLI.
    listed = cli_json(keys, redis_url, "list", "--type", "orders", "--json")["sagas"]
    assert sorted(r["record_id"] for r in listed) == rids
    assert {r["state"] for r in listed} == {"completed"}
    shown = cli_json(keys, redis_url, "show", "r-3", "--type", "refunds", "--json")
    assert shown["saga"]["user_id"] == "payee"
    top = cli_json(keys, redis_url, "top", "--once", "--interval", "0", "--json")
    seen = sorted((s["type"], s["step"], s["committed"]) for s in top["steps"] if not s["undoes"])
    assert seen == sorted([("orders", s, len(rids)) for s in ORDERS]
                          + [("refunds", s, len(rids)) for s in REFUNDS])  # fmt: skip
    # orders' charge has a compensation: its undo queue has a row of its own, unused here
    undo = {(s["type"], s["step"]): s for s in top["steps"] if s["undoes"]}
    assert set(undo) == {("orders", "undo:charge")}
    assert undo[("orders", "undo:charge")]["committed"] == 0

    # saga start --type with an --input that fits, then one that does not.
    started = cli(keys, redis_url, "start", "cli-1", "u9", "--type", "orders",
                  "--input", '{"sku": "Z", "qty": 1}', "--wait", "--timeout", "60")  # fmt: skip
    assert started.returncode == 0, started.stderr
    assert "completed" in started.stdout
    bad = cli(keys, redis_url, "start", "cli-2", "u9", "--type", "orders", "--input", "[1]")
    assert bad.returncode == 2
    assert bad.stderr.startswith("saga: the input does not fit step 'router', which takes a JSON")
    assert bad.stderr.count("\n") == 1


async def test_an_unknown_type_is_one_sentence(keys: Keys, redis_url: str, redis: Any) -> None:
    """--type naming no registered type: exit 2 and the registered types, no traceback."""
    await redis.hset(keys.types_registry(), "orders", b'{"name":"orders","steps":["router"]}')
    top = ["top", "--once", "--interval", "0"]
    commands = (["list"], ["show", "r-1"], ["start", "r-1", "u1"], ["cancel", "r-1"],
                ["retry", "r-1"], ["dlq", "list"], top, ["costs"], ["review", "accept", "r-1"],
                ["init"])  # fmt: skip
    for argv in commands:
        res = cli(keys, redis_url, *argv, "--type", "ordres")
        assert res.returncode == 2, (argv, res.stderr)
        assert res.stderr == (
            "saga: no saga type 'ordres' is registered (registered: orders); "
            "a worker or client of the type registers it.\n"
        ), argv


async def test_top_counts_each_types_workers_apart(
    spawn: SpawnWorker, keys: Keys, redis_url: str, redis: Any
) -> None:
    """A documents worker and an orders worker, both serving a step named `router`: each
    presence says its type, `saga top` counts one worker per type's router, lists the
    types' workers with their type, and `--type` shows one type and its workers only."""
    docs_worker, orders_worker = spawn(), spawn("tests.app.apps:orders")
    await docs_worker.wait_ready()
    await orders_worker.wait_ready()
    argv = ["top", "--once", "--interval", "0"]

    async def both_present() -> bool:
        doc = cli_json(keys, redis_url, *argv, "--json")
        return len(doc["workers"]) == 2

    await wait_until(both_present, within=20, what="both workers' presence")
    doc = cli_json(keys, redis_url, *argv, "--json")
    workers = {(s["type"], s["step"]): s["workers"] for s in doc["steps"]}
    assert workers[("documents", "router")] == workers[("orders", "router")] == 1
    assert workers[("orders", "ship")] == workers[("documents", "grouper")] == 1
    by_pid = {w["pid"]: (w["saga_type"], tuple(w["steps"])) for w in doc["workers"]}
    assert by_pid == {docs_worker.pid: ("documents", ("router", "parser", "grouper")),
                      orders_worker.pid: ("orders", ORDERS)}  # fmt: skip

    only = cli_json(keys, redis_url, *argv, "--type", "orders", "--json")
    assert {(s["type"], s["step"]) for s in only["steps"]} == {("orders", s) for s in ORDERS} | {
        ("orders", "undo:charge")
    }
    assert [w["pid"] for w in only["workers"]] == [orders_worker.pid]

    table = cli(keys, redis_url, *argv)
    assert table.returncode == 0, table.stderr
    assert f"orders/{','.join(ORDERS)}" in table.stdout
    assert "documents/router,parser,grouper" in table.stdout
