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
