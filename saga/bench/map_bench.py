"""What a map costs per item, beside a plain chain's cost per transition (``saga bench
--features``): on a private embedded server (AOF on, as in ``saga bench``), a map of 100
items run through the real scripts as an executor calls them (read in batches, claimed in
one call per batch, committed in one pipeline), from its parent's commit to the fan-in;
and a chain of three steps over 100 sagas, the same way. Counted from the server: every
command it ran (the scripts' own ``redis.call``s too, INFO commandstats) and its CPU (INFO
cpu, the AOF and Lua included)."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from saga.bench.server_features import Row

ITEMS = 100


async def _counts(client: Any) -> tuple[int, float]:
    """Commands the server ran so far (INFO itself left out) and its CPU seconds."""
    stats = await client.info("commandstats")
    calls = sum(int(v["calls"]) for k, v in stats.items() if k != "cmdstat_info")
    cpu = await client.info("cpu")
    return calls, float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"])


async def _read(client: Any, keys: Any, step: str) -> list[tuple[str, str, str, int]]:
    from saga.state.keys import GROUP
    from saga.state.replies import text

    reply = await client.xreadgroup(GROUP, "w-1", {keys.ready(0, step): ">"}, count=100)
    return [(text(i), text(f[b"rid"]), text(f.get(b"i", b"")), int(f[b"ep"]))
            for _, got in reply or [] for i, f in got]  # fmt: skip


async def _map_run(sm: Any) -> tuple[int, float]:
    """Commands and CPU seconds of one map of ITEMS items: spawn to fan-in."""
    from saga.state import map_calls
    from saga.state.requests import CommitRequest

    await sm.start("m-1", "u1", "split")
    [row] = await _read(sm.client, sm.keys, "split")
    [got] = await sm.claim("split", 0, [row[:2]], worker="w-1", lease_ms=60_000,
                           max_lease_expiries=3)  # fmt: skip
    items = b"[" + b",".join(b'{"page":%d}' % i for i in range(ITEMS)) + b"]"
    await sm.commit(got.claim, CommitRequest(output=items, next_step="parse", worker="w-1"))
    before = await _counts(sm.client)
    done = 0
    while done < ITEMS:
        rows = await _read(sm.client, sm.keys, "parse")
        outs = await map_calls.claim_items(sm, "parse", 0, rows, plan=sm.maps["parse"],
                                           worker="w-1", lease_ms=60_000, max_lease_expiries=3,
                                           op=f"op{done}")  # fmt: skip
        claims = [o.claim for o in outs if o.claim is not None]
        req = CommitRequest(output=b'{"fields":3}', worker="w-1")
        await sm.finish_many([(c, req) for c in claims])
        done += len(claims)
    after = await _counts(sm.client)
    return after[0] - before[0], after[1] - before[1]


async def _chain_run(sm: Any) -> tuple[int, float]:
    """Commands and CPU seconds of ITEMS sagas through a chain of three steps."""
    from saga.state.requests import CommitRequest

    steps = ("router", "parser", "grouper")
    for i in range(ITEMS):
        await sm.start(f"c-{i}", "u1", "router")
    before = await _counts(sm.client)
    for n, step in enumerate(steps):
        nxt = steps[n + 1] if n + 1 < len(steps) else ""
        rows = await _read(sm.client, sm.keys, step)
        prev = steps[n - 1] if n else "_input"
        outs = await sm.claim(step, 0, [r[:2] for r in rows], worker="w-1", lease_ms=60_000,
                              max_lease_expiries=3, prev_step=prev)  # fmt: skip
        req = CommitRequest(output=b'{"fields":3}', next_step=nxt, worker="w-1")
        await sm.finish_many([(o.claim, req) for o in outs if o.claim is not None])
    after = await _counts(sm.client)
    return after[0] - before[0], after[1] - before[1]


async def map_rows() -> list[Row]:
    from saga.adapters.embedded_redis import EmbeddedServer
    from saga.state.connection import connect
    from saga.state.keys import Keys
    from saga.state.machine import StateMachine
    from saga.state.map_calls import MapPlan
    from saga.state.scripts import ensure_loaded
    from saga.state.streams import ensure_groups

    with tempfile.TemporaryDirectory(prefix="saga-map-bench-") as tmp:
        server = EmbeddedServer(data_dir=Path(tmp), tied=True)
        server.start()
        client = connect(server.url)
        try:
            await ensure_loaded(client)
            sm = StateMachine(client, Keys(prefix="mapbench", partitions=1))
            sm.maps["parse"] = MapPlan(over="split", next_step="merge", concurrency=100)
            await ensure_groups(client, sm.keys, ["split", "parse", "merge", "router",
                                                  "parser", "grouper"])  # fmt: skip
            m_cmds, m_cpu = await _map_run(sm)
            c_cmds, c_cpu = await _chain_run(sm)
            transitions = ITEMS * 3
            return [
                ("server", f"map of {ITEMS} items: Redis commands per item (a count)",
                 m_cmds / ITEMS),
                ("server", f"map of {ITEMS} items: server CPU per item", m_cpu / ITEMS * 1e6),
                ("server", "plain chain: Redis commands per transition (a count)",
                 c_cmds / transitions),
                ("server", "plain chain: server CPU per transition", c_cpu / transitions * 1e6),
            ]  # fmt: skip
        finally:
            await client.aclose()
            server.stop()
