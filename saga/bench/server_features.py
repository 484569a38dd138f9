"""What each server-side feature of a transition costs (``saga bench --features``):
on a private embedded server (AOF on, as in ``saga bench``), the server's CPU (INFO
cpu, so the AOF and Lua included) per call of a script doing only that feature,
less the same empty script."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

Row = tuple[str, str, float]
"""(side, feature, µs per call): a row of ``saga bench --features``, either side."""

_HISTORY = (
    "redis.call('XADD', KEYS[1], 'MAXLEN', '~', 1000, '*', 'e', 'committed', 's', 'router',"
    " 'a', 1, 'ep', 1, 'w', 'worker-1', 't', 1, 'd', 3, 'n', 'parser', 'op', ARGV[1])"
)
_SCRIPTS = {
    "history event (XADD to the record's stream)": _HISTORY,
    "state index move (ZREM + ZADD)": (
        "redis.call('ZREM', KEYS[2], ARGV[1]) redis.call('ZADD', KEYS[3], 1, ARGV[1])"
    ),
    "counter (HINCRBY)": "redis.call('HINCRBY', KEYS[4], 'committed:router', 1)",
}


async def _server_cpu(client: Any, body: str, n: int, key_of: Callable[[int], list[str]]) -> float:
    sha = await client.script_load(body + " return 1")
    before = await client.info("cpu")
    for i in range(0, n, 200):
        pipe = client.pipeline(transaction=False)
        for j in range(i, min(i + 200, n)):
            keys = key_of(j)
            pipe.evalsha(sha, len(keys), *keys, f"op{j}")
        await pipe.execute()
    after = await client.info("cpu")
    used = sum(float(after[k]) - float(before[k]) for k in ("used_cpu_user", "used_cpu_sys"))
    return used / n * 1e6


async def server_rows(n: int) -> list[Row]:
    from saga.adapters.embedded_redis import EmbeddedServer
    from saga.state.connection import connect
    from saga.state.keys import Keys
    from saga.state.model import SagaState

    with tempfile.TemporaryDirectory(prefix="saga-features-") as tmp:
        server = EmbeddedServer(data_dir=Path(tmp), tied=True)
        server.start()
        client = connect(server.url)
        try:
            k = Keys(prefix="features")
            a, b = k.state_index(0, SagaState.COMPLETED), k.state_index(0, SagaState.FAILED)

            def keys(j: int) -> list[str]:
                return [k.history(f"r{j}"), a, b, k.stats(0)]

            base = await _server_cpu(client, "", n, keys)
            rows: list[Row] = [("server", "an EVALSHA doing nothing (4 keys)", base)]
            for name, body in _SCRIPTS.items():
                await client.flushall()
                rows.append(("server", name, await _server_cpu(client, body, n, keys) - base))
            return rows
        finally:
            await client.aclose()
            server.stop()
