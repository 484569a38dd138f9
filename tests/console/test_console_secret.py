"""Console tokens and sessions cannot be forged by writing Redis: they are stored under an
HMAC with the console's secret (SAGA_CONSOLE_SECRET), which Redis never holds, and each
entry carries a MAC of its fields. A missing or wrong secret stops the console at start."""

from __future__ import annotations

import hashlib
import json
import time
from typing import Any

import msgspec
import pytest

from saga.console.tokens import Role
from saga.state.keys import Keys
from tests.console.support import RunningConsole, cli_json, console_signer, run_cli

pytestmark = pytest.mark.anyio

FORGED = "saga_" + "f" * 43


def entry(role: str = "operator", **extra: Any) -> bytes:
    now = int(time.time() * 1000)
    return json.dumps({"name": "mallory", "role": role, "created_ms": now, **extra}).encode()


async def test_entries_written_without_the_secret_are_not_tokens(
    console: RunningConsole, tokens: dict[Role, str], redis: Any, keys: Keys
) -> None:
    """A digest HSET by hand (the old sha256 scheme, in the new hash or the old one), an
    entry under the right HMAC key but without a valid MAC, and a viewer's entry edited
    to operator are all refused; the properly made tokens still work."""
    sha = hashlib.sha256(FORGED.encode()).hexdigest()
    await redis.hset(keys.console_tokens(), sha, entry())
    await redis.hset(keys.legacy_console_tokens(), sha, entry())
    keyed = console_signer().token_key(FORGED)  # even knowing the key: no valid MAC
    await redis.hset(keys.console_tokens(), keyed, entry(mac="0" * 64))
    viewer_key = console_signer().token_key(tokens[Role.VIEWER])
    stored = json.loads(await redis.hget(keys.console_tokens(), viewer_key))
    await redis.hset(keys.console_tokens(), viewer_key, json.dumps({**stored, "role": "operator"}))
    async with console.client(FORGED) as http:
        res = await http.get("/api/v1/me")
        assert res.status_code == 401 and "unknown, expired or revoked" in res.text
    async with console.client(tokens[Role.VIEWER]) as http:
        assert (await http.get("/api/v1/me")).status_code == 401  # its MAC no longer fits
    async with console.client(tokens[Role.OPERATOR]) as http:
        me = (await http.get("/api/v1/me")).json()
        assert (me["subject"], me["role"]) == ("olga", "operator")


async def test_a_session_written_by_hand_is_not_a_sign_in(
    console: RunningConsole, tokens: dict[Role, str], redis: Any, keys: Keys
) -> None:
    """A session stored under the sha256 of a chosen cookie (the old scheme), naming a
    real operator token, does not sign that cookie in."""
    cookie = "c" * 43
    operator_key = console_signer().token_key(tokens[Role.OPERATOR])
    body = msgspec.json.encode(
        {"subject": "olga", "role": "operator", "token_digest": operator_key, "created_ms": 1}
    )
    await redis.set(keys.console_session(hashlib.sha256(cookie.encode()).hexdigest()), body)
    await redis.set(keys.console_session(console_signer().session_key(cookie)), body)
    async with console.client() as http:
        http.cookies.set("saga_session", cookie)
        assert (await http.get("/api/v1/me")).status_code == 401


async def test_a_token_added_by_the_command_signs_in(
    start_console: Any, env: dict[str, str]
) -> None:
    """`saga console token add` (with the console's secret) makes a token the console takes;
    `token list` shows only entries the secret vouches for."""
    token = (await cli_json(env, "console", "token", "add", "ana", "--role", "operator"))["token"]
    console = start_console()
    async with console.client(token) as http:
        assert (await http.get("/api/v1/me")).json()["role"] == "operator"
    listed = await cli_json(env, "console", "token", "list")
    assert [t["name"] for t in listed["tokens"]] == ["ana"]


async def test_a_missing_short_or_wrong_secret_stops_the_console(env: dict[str, str]) -> None:
    """No secret with REDIS_URL set, one too short, or another than the tokens were made
    with: exit 2 and one sentence, before listening; token add refuses the same way."""
    no_secret = {k: v for k, v in env.items() if k != "SAGA_CONSOLE_SECRET"}
    code, _, err = await run_cli(no_secret, "console", "--port", "0")
    assert code == 2 and err.count("\n") == 1
    assert err.startswith("saga: SAGA_CONSOLE_SECRET is not set: the console keys its tokens")
    code, _, err = await run_cli({**env, "SAGA_CONSOLE_SECRET": "short"}, "console", "--port", "0")
    assert (code, err) == (2, "saga: SAGA_CONSOLE_SECRET must be at least 32 characters long, "
                              "not 5.\n")  # fmt: skip
    await cli_json(env, "console", "token", "add", "ana")  # stores the secret's check value
    wrong = {**env, "SAGA_CONSOLE_SECRET": "w" * 40}
    for argv in (["console", "--port", "0"], ["console", "token", "add", "bob"]):
        code, _, err = await run_cli(wrong, *argv)
        assert code == 2 and err.count("\n") == 1, err
        assert err.startswith("saga: SAGA_CONSOLE_SECRET is not the secret this keyspace's")


async def test_saga_config_masks_the_console_secret(env: dict[str, str]) -> None:
    """`saga config --json` shows the console secret as ***."""
    shown = await cli_json(env, "config")
    assert shown["console"]["secret"] == "***"
    assert env["SAGA_CONSOLE_SECRET"] not in json.dumps(shown)
