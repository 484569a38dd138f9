"""A connection closed by another task in the middle of a write raises redis-py's
ConnectionError (retried like any outage), not the raw AttributeError or TypeError
redis-py 8.1 lets escape (its issues #3546 and #4287); any other such error stays loud."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from redis.exceptions import ConnectionError as RedisConnectionError

from saga.state.connection import TRANSIENT_ERRORS, connect

pytestmark = pytest.mark.anyio

PING = b"*1\r\n$4\r\nPING\r\n"


@pytest.fixture
async def conn(redis_url: str) -> AsyncIterator[Any]:
    """A connected connection of the engine's client (its own connection class)."""
    client = connect(redis_url)
    c = await client.connection_pool.get_connection()
    try:
        await c.connect()
        yield c
    finally:
        await client.connection_pool.release(c)
        await client.aclose()


async def test_a_write_on_a_connection_closed_meanwhile_is_a_connection_error(
    conn: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def closed_mid_write(command: Any) -> None:
        conn._writer = None  # what a concurrent disconnect leaves behind
        raise AttributeError("'NoneType' object has no attribute 'writelines'")

    monkeypatch.setattr(conn, "_send_packed_command", closed_mid_write)
    with pytest.raises(RedisConnectionError) as err:
        await conn.send_packed_command(PING)
    assert isinstance(err.value, TRANSIENT_ERRORS)
    assert not conn.is_connected


async def test_an_attribute_error_that_is_not_the_race_stays_loud(
    conn: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def defect(command: Any) -> None:
        raise AttributeError("a defect, not a closed socket")

    monkeypatch.setattr(conn, "_send_packed_command", defect)
    with pytest.raises(AttributeError, match="a defect"):
        await conn.send_packed_command(PING)
