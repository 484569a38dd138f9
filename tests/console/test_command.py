"""`saga console` and `saga console token` through the real CLI: tokens are minted once
and stored hashed, listed without secrets and revoked; --dev serves loopback only;
bad configuration is one sentence with exit code 2."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from saga.console.tokens import digest
from saga.state.keys import Keys
from tests.cli.inspect_support import env_for
from tests.console.conftest import StartConsole
from tests.console.support import cli_json, console_signer, run_cli
from tests.executor.support import REPO, http_status

pytestmark = pytest.mark.anyio


async def test_token_add_list_revoke(
    keys: Keys, redis: Any, start_console: StartConsole, env: dict[str, str]
) -> None:
    """add prints the token once and stores only its HMAC under the console's secret; list
    shows name and role; the token signs in until revoke; revoking an unknown name is
    exit 1."""
    added = await cli_json(env, "console", "token", "add", "ana", "--role", "operator",
                           "--expires", "2h")  # fmt: skip
    token = added["token"]
    assert re.fullmatch(r"saga_[A-Za-z0-9_-]{43}", token)
    stored = await redis.hgetall(keys.console_tokens())
    assert list(stored) == [console_signer().token_key(token).encode()]
    assert token.encode() not in b"".join(stored.values())
    code, listed, _ = await run_cli(env, "console", "token", "list")
    assert code == 0 and token not in listed
    assert re.search(r"^ana +operator +\S+ \S+ +\S+ \S+$", listed, re.M), listed
    code, _, err = await run_cli(env, "console", "token", "add", "ana")
    assert code == 1
    assert err == ("saga: a token named 'ana' exists already; revoke it first or "
                   "pick another name.\n")  # fmt: skip
    console = start_console()
    async with console.client(token) as http:
        assert (await http.get("/api/v1/me")).json()["subject"] == "ana"
        assert (await run_cli(env, "console", "token", "revoke", "ana"))[0] == 0
        assert (await http.get("/api/v1/me")).status_code == 401
    code, _, err = await run_cli(env, "console", "token", "revoke", "ana")
    assert code == 1
    assert "no console token is named 'ana'" in err


async def test_dev_mode_refuses_an_address_beyond_loopback(env: dict[str, str]) -> None:
    """--dev on 0.0.0.0 exits 2 with one sentence, before listening."""
    code, _, err = await run_cli(env, "console", "--dev", "--host", "0.0.0.0", "--port", "0")
    assert code == 2
    assert err.startswith("saga: --dev turns sign-in off, so it listens on loopback only")
    assert err.count("\n") == 1


async def test_a_bad_token_file_is_one_sentence(env: dict[str, str], tmp_path: Path) -> None:
    """A malformed token file stops the console with the file, line and problem."""
    bad = tmp_path / "tokens"
    with_file = {**env, "SAGA_CONSOLE_TOKEN_FILE": str(bad)}
    for text, message in [
        ("# people\nana operator\n", f"{bad} line 2: expected '<name> <role> <token>', got 2 "
                                      "field(s)"),
        ("ana admin " + "x" * 30, "role 'admin' must be viewer, reviewer, operator or producer"),
        ("ana viewer short", f"{bad} line 1: a token must be at least 24 characters long"),
    ]:  # fmt: skip
        bad.write_text(text)
        assert await run_cli(with_file, "console", "--port", "0") == (2, "", f"saga: {message}.\n")


async def test_a_token_file_signs_people_in(start_console: StartConsole, tmp_path: Path) -> None:
    """Tokens in a file (plain or as sha256) sign in with their role."""
    plain, hashed = "p" * 32, "h" * 32
    tokens = tmp_path / "tokens"
    tokens.write_text(f"pia viewer {plain}\nhal operator sha256:{digest(hashed)}  # ops\n")
    console = start_console(SAGA_CONSOLE_TOKEN_FILE=str(tokens))
    for token, want in ((plain, ("pia", "viewer")), (hashed, ("hal", "operator"))):
        async with console.client(token) as http:
            me = (await http.get("/api/v1/me")).json()
            assert (me["subject"], me["role"]) == want


def test_console_command_serves_on_loopback_with_dev(keys: Keys, redis_url: str) -> None:
    """`saga console --dev --port 0` prints its URL, warns that sign-in is off and serves
    the pages and the API; SIGTERM stops it."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "saga.cli.main", "console", "--dev", "--port", "0"],
        cwd=REPO, env=env_for(keys, redis_url), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None and proc.stderr is not None
        first = proc.stdout.readline()
        url = re.fullmatch(r"saga console: (http://127\.0\.0\.1:\d+/)\n", first)
        assert url, first
        assert "--dev: no sign-in" in proc.stderr.readline()
        with httpx.Client(base_url=url.group(1)) as http:
            deadline = time.monotonic() + 30
            while http_status(int(url.group(1).rsplit(":", 1)[1].strip("/")), "/readyz") != 200:
                assert time.monotonic() < deadline, "the console did not get ready"
                time.sleep(0.05)
            assert http.get("/api/v1/me").json()["subject"] == "dev"
            assert "<h1>Sagas</h1>" in http.get("/sagas").text
    finally:
        proc.terminate()
        assert proc.wait(timeout=20) in (0, -15)  # uvicorn re-raises SIGTERM once it shut down
