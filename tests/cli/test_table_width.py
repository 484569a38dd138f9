"""Tables fit the terminal: no line wider than COLUMNS (or a pty's width), errors cut
with an ellipsis, the show header's error wrapped but never cut; full rows piped."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import struct
import subprocess
import sys
import termios
from typing import Any

import pytest

from saga.state.keys import Keys
from saga.state.model import FailAction
from tests.cli.inspect_support import (
    cli,
    commit,
    env_for,
    fail,
    machine,
    retried_and_reclaimed,
    start,
)

pytestmark = pytest.mark.anyio

LONG = (
    "InvalidInputError",
    "the PDF has no extractable text (a scan without a text layer?); it needs OCR first, "
    "then submit it again with the same record id and user id",
)
COMMANDS = (
    ("show", "mr-long"),
    ("show", "mr-busy"),
    ("list",),
    ("dlq", "list"),
    ("retry", "--step", "parser", "--failed", "--dry-run"),
    ("top", "--once", "--interval", "0"),
    ("costs",),
)
_ANSI = re.compile(r"\033\[[0-9;]*[A-Za-z]")


async def sagas(redis: Any, keys: Keys) -> None:
    """mr-long dead at parser with a 140-character error after a retry at the router,
    under a long user id; mr-busy retried, reclaimed and fenced (a busy timeline)."""
    sm = await machine(redis, keys)
    await start(sm, "mr-long", "user-with-a-rather-long-identifier-0042")
    await fail(sm, "router", FailAction.RETRY, error=("DocumentFetchError", "GET …: 503"))
    assert await sm.promote("router", 0, ["mr-long"]) == (1, 0)
    await commit(sm, "router", worker="vm-2535-1a22c1bbbfb-router")
    await fail(sm, "parser", FailAction.DEAD, error=LONG, cost=0.0042)
    await retried_and_reclaimed(sm, "mr-busy")


def widest(text: str) -> int:
    return max((len(_ANSI.sub("", line)) for line in text.splitlines()), default=0)


@pytest.mark.parametrize("columns", [60, 80, 120, 160])
async def test_no_line_exceeds_columns(
    redis: Any, keys: Keys, redis_url: str, columns: int
) -> None:
    """With COLUMNS=N every table of show, list, dlq list, retry, top and costs fits N."""
    await sagas(redis, keys)
    for argv in COMMANDS:
        res = cli(keys, redis_url, *argv, env={"COLUMNS": str(columns)})
        assert res.returncode == 0, (argv, res.stderr)
        assert widest(res.stdout) <= columns, (argv, res.stdout)
        if argv == ("show", "mr-long"):
            assert "…" in res.stdout or columns >= 160  # the timeline's error was cut
            header = re.sub(r"\s+", " ", res.stdout.split("\n\n")[0])
            assert LONG[1] in header  # ... but the header's is wrapped, whole


async def test_piped_rows_are_whole(redis: Any, keys: Keys, redis_url: str) -> None:
    """Without a terminal or COLUMNS, rows are printed in full (for grep and less -S)."""
    await sagas(redis, keys)
    for argv in (("list",), ("dlq", "list"), ("show", "mr-long")):
        res = cli(keys, redis_url, *argv)
        assert res.returncode == 0, res.stderr
        assert f"{LONG[0]}: {LONG[1]}" in res.stdout or LONG[1] in res.stdout
        assert "…" not in res.stdout.replace("GET …: 503", "")


def in_pty(keys: Keys, redis_url: str, columns: int, *argv: str) -> str:
    """``saga <argv>`` with its stdout on a pseudo-terminal ``columns`` wide."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
    env = env_for(keys, redis_url)
    env.pop("COLUMNS", None)
    env.pop("LINES", None)
    argv_ = [sys.executable, "-m", "saga.cli.main", *argv]
    proc = subprocess.Popen(
        argv_, env=env, stdin=subprocess.DEVNULL, stdout=slave, stderr=subprocess.PIPE
    )
    os.close(slave)
    chunks = []
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(master)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    return b"".join(chunks).decode().replace("\r\n", "\n")


@pytest.mark.parametrize("columns", [80, 160])
async def test_terminal_width_is_fitted(
    redis: Any, keys: Keys, redis_url: str, columns: int
) -> None:
    """On a real terminal (a pty), show, list and dlq list fit it; the header's error
    line is whole at 160 columns."""
    await sagas(redis, keys)
    for argv in (("show", "mr-long"), ("list",), ("dlq", "list")):
        out = in_pty(keys, redis_url, columns, *argv)
        assert widest(out) <= columns, (argv, out)
    shown = in_pty(keys, redis_url, columns, "show", "mr-long")
    header = re.sub(r"\s+", " ", _ANSI.sub("", shown).split("\n\n")[0])
    assert LONG[1] in header
