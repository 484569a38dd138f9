"""A connection closed by another task in the middle of a write raises redis-py's
ConnectionError (retried like any outage), not the raw AttributeError or TypeError
redis-py 8.1 lets escape (its issues #3546 and #4287); any other such error stays loud."""

from __future__ import annotations

from typing import Any

import pytest
from redis.exceptions import ConnectionError as RedisConnectionError

from saga.state.connection import TRANSIENT_ERRORS, connect

pytestmark = pytest.mark.anyio


async def test_a_write_on_a_connection_closed_meanwhile_is_a_connection_error(
    redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = connect(redis_url)
    conn = await client.connection_pool.get_connection()
    try:
        await conn.connect()

        async def closed_mid_write(command: Any) -> None:
            conn._writer = None  # what a concurrent disconnect leaves behind
            raise AttributeError("'NoneType' object has no attribute 'writelines'")

        monkeypatch.setattr(conn, "_send_packed_command", closed_mid_write)
        with pytest.raises(RedisConnectionError) as err:
            await conn.send_packed_command(b"*1\r\n$4\r\nPING\r\n")
        assert isinstance(err.value, TRANSIENT_ERRORS)
        assert not conn.is_connected
    finally:
        await client.connection_pool.release(conn)
        await client.aclose()


async def test_the_same_error_on_an_open_connection_stays_what_it_is(
    redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = connect(redis_url)
    conn = await client.connection_pool.get_connection()
    try:
        await conn.connect()

        async def defect(command: Any) -> None:
            raise AttributeError("a defect, not a closed socket")

        monkeypatch.setattr(conn, "_send_packed_command", defect)
        with pytest.raises(AttributeError, match="a defect"):
            await conn.send_packed_command(b"*1\r\n$4\r\nPING\r\n")
    finally:
        await client.connection_pool.release(conn)
        await client.aclose()
