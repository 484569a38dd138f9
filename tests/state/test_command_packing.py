"""The engine's connections pack commands with hiredis: the same bytes as redis-py,
and redis-py's own errors for what it refuses."""

from __future__ import annotations

import pytest
from redis.asyncio.connection import Connection
from redis.exceptions import DataError

from saga.state.connection import _hiredis_packing


def test_hiredis_packing_gives_redis_py_bytes() -> None:
    fast, plain = _hiredis_packing(Connection)(), Connection()
    commands = [
        ("EVALSHA", "0" * 40, 3, "saga:{p0}:saga:r1", "saga:{p0}:hist:r1", b"k", 7, -1, 0.25),
        ("XADD", "s", "*", "rid", "r1", "text", "päge ✓".encode()),
        ("SCRIPT LOAD", "return 1"),  # a two-word command name
    ]
    assert fast.pack_commands(commands) == plain.pack_commands(commands)


def test_what_redis_py_refuses_is_still_refused() -> None:
    fast = _hiredis_packing(Connection)()
    with pytest.raises(DataError):
        fast.pack_command("SET", "k", True)
    with pytest.raises(DataError):
        fast.pack_command("SET", "k", None)
