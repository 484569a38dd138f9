"""REDIS_PASSWORD authenticates when REDIS_URL carries no password (the chart's shape:
the URL names host, port and ACL user; the password comes from a Secret key), and the
drain defaults to the longest step timeout."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from redis.exceptions import ConnectionError as RedisConnectionError

from saga.adapters.embedded_redis import EmbeddedServer
from saga.api.pipeline import StepSpec
from saga.config.settings import Settings, load_settings
from saga.wiring.runtime import open_client
from saga.worker.executor import drain_seconds

pytestmark = pytest.mark.anyio

PASSWORD = "pa ss:w@rd/with%odd&chars"
"""Characters a URL would need percent-encoded: none of them matters in REDIS_PASSWORD."""


@pytest.fixture
async def acl_user(redis: Any) -> AsyncIterator[str]:
    user = f"u-{uuid.uuid4().hex[:8]}"
    await redis.execute_command("ACL", "SETUSER", user, "on", f">{PASSWORD}", "~*", "+@all")
    yield user
    await redis.execute_command("ACL", "DELUSER", user)


def url_for(server: EmbeddedServer, userinfo: str) -> str:
    return f"unix://{userinfo}@{server.socket_path}"


async def whoami(settings: Settings) -> str:
    client = open_client(settings)
    try:
        return (await client.execute_command("ACL", "WHOAMI")).decode()
    finally:
        await client.aclose()


async def test_password_from_its_own_variable(redis_server: EmbeddedServer, acl_user: str) -> None:
    """URL with the user only + REDIS_PASSWORD: authenticated as that user."""
    env = {"REDIS_URL": url_for(redis_server, acl_user), "REDIS_PASSWORD": PASSWORD}
    assert await whoami(load_settings({**env, "SAGA_DATA_DIR": "/tmp/x"})) == acl_user


async def test_without_it_the_user_is_refused(redis_server: EmbeddedServer, acl_user: str) -> None:
    """The same URL without REDIS_PASSWORD is refused by the server."""
    settings = load_settings({"REDIS_URL": url_for(redis_server, acl_user), "SAGA_DATA_DIR": "/x"})
    with pytest.raises(RedisConnectionError, match="username-password"):
        await whoami(settings)


async def test_a_password_in_the_url_wins(redis_server: EmbeddedServer, acl_user: str) -> None:
    """A URL that carries a password uses it; REDIS_PASSWORD does not override it."""
    env = {"REDIS_URL": url_for(redis_server, f"{acl_user}:wrong"), "REDIS_PASSWORD": PASSWORD}
    with pytest.raises(RedisConnectionError, match="username-password"):
        await whoami(load_settings({**env, "SAGA_DATA_DIR": "/tmp/x"}))


def test_password_is_masked_in_saga_config() -> None:
    """`saga config` never shows REDIS_PASSWORD."""
    masked = load_settings({"REDIS_PASSWORD": PASSWORD, "SAGA_DATA_DIR": "/x"}).masked()
    assert masked["redis_password"] == "***"
    assert PASSWORD not in str(masked)


def test_drain_defaults_to_the_longest_step_timeout() -> None:
    """Unset SAGA_DRAIN_SECONDS: the longest timeout of the served steps; set: its value."""

    async def noop(ctx: Any, inp: Any) -> Any:
        return inp

    specs = [
        StepSpec(name=n, fn=noop, input_type=dict, output_type=dict, timeout_s=t)
        for n, t in (("router", 120.0), ("parser", 600.0))
    ]
    assert drain_seconds(load_settings({"SAGA_DATA_DIR": "/x"}), specs) == 600.0
    env = {"SAGA_DATA_DIR": "/x", "SAGA_DRAIN_SECONDS": "45"}
    assert drain_seconds(load_settings(env), specs) == 45.0
