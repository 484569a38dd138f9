"""Helpers of the security tests: the shipped ACL users applied with test passwords, and
``saga`` CLI runs as a given user."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.executor.support import REPO

ACL_FILE = REPO / "deploy" / "redis" / "saga-users.acl"


def acl_users(path: Path = ACL_FILE) -> dict[str, list[str]]:
    """user name -> its rules, from the shipped ACL file."""
    users = {}
    for line in path.read_text().splitlines():
        if line.startswith("user "):
            _, name, *rules = line.split()
            users[name] = rules
    return users


async def apply_acl(client: Any, prefix: str, password: str) -> list[str]:
    """Create the shipped users for key prefix ``prefix``, on, with ``password``."""
    names = []
    for name, shipped in acl_users().items():
        rules = [_prefixed(r, prefix) for r in shipped if r != "off"]
        await client.execute_command("ACL", "SETUSER", name, *rules, "on", f">{password}")
        names.append(name)
    return names


def _prefixed(rule: str, prefix: str) -> str:
    """A shipped rule for key prefix ``prefix`` (``saga:``, ``{saga:`` and ``saga/``)."""
    return rule.replace("saga:", f"{prefix}:").replace("saga/", f"{prefix}/")


def url_for(url: str, user: str, password: str) -> str:
    scheme, rest = url.split("://", 1)
    return f"{scheme}://{user}:{password}@{rest}"


def saga_cli(
    env: dict[str, str], *args: str, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "saga.cli.main", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def held_commands(rules: list[str]) -> list[str]:
    """The commands (``name`` or ``name|sub``) a user's shipped rules grant, lowercase."""
    return [r[1:].lower() for r in rules if r.startswith("+") and not r.startswith("+@")]


def write_calls(key: str) -> dict[str, tuple[str, ...]]:
    """One call of each write command a shipped user may hold, aimed at ``key`` (a test
    fails if a user holds a write command missing here)."""
    return {
        "xadd": ("XADD", key, "*", "a", "b"),
        "xack": ("XACK", key, "g", "0-1"),
        "xdel": ("XDEL", key, "0-1"),
        "rename": ("RENAME", key, f"{key}:renamed"),
        "xreadgroup": ("XREADGROUP", "GROUP", "g", "c", "STREAMS", key, ">"),
        "xautoclaim": ("XAUTOCLAIM", key, "g", "c", "0", "0"),
        "xclaim": ("XCLAIM", key, "g", "c", "0", "0-1"),
        "xtrim": ("XTRIM", key, "MAXLEN", "0"),
        "xgroup|create": ("XGROUP", "CREATE", key, "g", "$", "MKSTREAM"),
        "xgroup|createconsumer": ("XGROUP", "CREATECONSUMER", key, "g", "c"),
        "xgroup|delconsumer": ("XGROUP", "DELCONSUMER", key, "g", "c"),
        "hset": ("HSET", key, "f", "v"),
        "hsetnx": ("HSETNX", key, "new-field", "v"),
        "hincrby": ("HINCRBY", key, "n", "1"),
        "hincrbyfloat": ("HINCRBYFLOAT", key, "n", "1"),
        "hdel": ("HDEL", key, "f"),
        "set": ("SET", key, "v"),
        "del": ("DEL", key),
        "expire": ("EXPIRE", key, "1"),
        "pexpire": ("PEXPIRE", key, "1"),
        "persist": ("PERSIST", key),
        "zadd": ("ZADD", key, "1", "m"),
        "zrem": ("ZREM", key, "m"),
        "zremrangebyscore": ("ZREMRANGEBYSCORE", key, "-inf", "+inf"),
        "zremrangebyrank": ("ZREMRANGEBYRANK", key, "0", "-1"),
        "sadd": ("SADD", key, "m"),
    }


ANY_CALL = "return redis.call(unpack(ARGV))"
"""A script that runs the command in its arguments: every write command, through EVAL."""


def script_calls(key: str, call: tuple[str, ...], sha: str) -> list[tuple[str, ...]]:
    """``call`` through a script: EVAL and EVALSHA, with ``key`` declared in KEYS and
    without (a script may name keys it was not given)."""
    return [
        ("EVAL", ANY_CALL, "1", key, *call),
        ("EVAL", ANY_CALL, "0", *call),
        ("EVALSHA", sha, "1", key, *call),
        ("EVALSHA", sha, "0", *call),
    ]
