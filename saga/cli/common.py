"""What every command shares: exit codes, errors on stderr, tables and JSON on stdout.

Colour and box drawing only on a TTY; ``--json`` always prints one JSON document.
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from enum import IntEnum
from typing import Any, TypeVar

import msgspec

from saga.cli.tables import colour, table, tty

__all__ = [
    "CliError",
    "Exit",
    "check_redis",
    "colour",
    "print_json",
    "run",
    "state_text",
    "table",
    "tty",
]

T = TypeVar("T")


class Exit(IntEnum):
    OK = 0
    FAILED = 1
    """The operation failed, or the record is not in the state asked."""
    USAGE = 2
    """Bad usage or invalid input."""
    UNREACHABLE = 3
    """Redis could not be reached."""
    NOT_FOUND = 4
    """The record does not exist."""
    TIMEOUT = 5
    """``--wait --timeout S`` ran out: the saga is still on its way."""
    NEEDS_REVIEW = 6
    """``--wait``: the saga completed, but a step flagged its output for a person's review
    (a script must not treat it as a clean success)."""
    INTERRUPTED = 130
    """Ctrl-C (128 + SIGINT), as shells report it."""
    STDOUT_CLOSED = 141
    """The reader of stdout went away (``| head``): 128 + SIGPIPE, printed nothing."""


class CliError(Exception):
    """One sentence for stderr, and the exit code to leave with."""

    def __init__(self, message: str, code: Exit = Exit.FAILED) -> None:
        super().__init__(message)
        self.code = code


STATE_COLOURS = {
    "completed": "32",
    "failed": "31",
    "cancelled": "90",
    "running": "36",
    "waiting_retry": "33",
    "waiting": "35",
    "pending": "37",
}


REVIEW_MARK = ", needs review"


def state_text(state: str, review: bool = False, parked: str = "") -> str:
    """The state, coloured on a TTY; a saga flagged for review says so beside it, and a
    parked one (``parked``: budget or circuit) reads ``parked (budget)``, as everywhere."""
    if parked and state == "waiting_retry":
        return colour(PARKED.format(parked), "33")
    if review:
        return colour(state + REVIEW_MARK, "33")
    return colour(state, STATE_COLOURS.get(state, "0"))


def print_json(obj: Any) -> None:
    write_out(msgspec.json.format(msgspec.json.encode(obj)) + b"\n")


def write_out(data: bytes) -> None:
    """``data`` onto stdout's file descriptor in a loop. Python's buffered stdout, given
    more than a pipe holds, can take a partial write and drop the rest when the reader
    left (`| head -1`), exiting 0; os.write raises BrokenPipeError instead, which the
    entry point turns into the documented quiet exit 141."""
    import os

    sys.stdout.flush()
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # a StringIO (tests, in-process callers)
        sys.stdout.write(data.decode())
        return
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def run(main: Callable[[], Awaitable[T]]) -> T:
    """Run a command's coroutine on asyncio. Not ``anyio.run``: importing anyio's
    asyncio backend costs ~20 ms of every cold start, and what a command uses of anyio
    (task groups, threads, sleeps) works as well on a loop asyncio started."""
    import asyncio

    async def wrapped() -> T:
        return await main()

    return asyncio.run(wrapped())


def check_redis(settings: Any) -> None:
    """Reach Redis once (and check SAGA_PARTITIONS) before a long-running command says
    it started: a bad REDIS_URL is then the same one sentence and exit code (2 or 3) as
    for every other command, not a traceback in a log line after a URL was printed."""

    async def go() -> None:
        from saga.wiring.runtime import client_for

        async with client_for(settings):
            pass

    run(go)


def fmt_ms(ms: int) -> str:
    import time

    if not ms:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ms / 1000)) + f".{ms % 1000:03d}"


def fmt_usd(v: float) -> str:
    """Dollars to four places, or to six under a hundredth of a cent, so an LLM call's
    $0.000013 is not printed as 0.0000 (the timeline's ``money`` does the same)."""
    return f"{v:,.6f}" if 0 < abs(v) < 0.0001 else f"{v:,.4f}"


def fmt_resume(ms: int) -> str:
    """When a parked saga runs again: UTC to the second (the budget periods and breaker
    times are UTC), rounded so a due time a few ms off the period's start (the worker's
    and the server's clocks) reads as the period's start. The one format for it in
    `saga show`, `saga budget show`, the error message and the console."""
    import time

    if not ms:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(round(ms / 1000)))


PARKED = "parked ({})"
"""A saga waiting with its attempt refunded, for people: ``parked (budget)``."""


def fmt_duration(seconds: float) -> str:
    if seconds < 1:
        return f"{seconds * 1000:.0f}ms"
    if seconds < 120:
        return f"{seconds:.1f}s"
    return f"{seconds / 60:.1f}m"


def parse_since(value: str | None) -> int:
    """``--since`` as epoch ms: ``30m``, ``2h``, ``7d``, or an ISO date/time."""
    import datetime as dt
    import time

    if not value:
        return 0
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    if value[-1] in units and value[:-1].replace(".", "", 1).isdigit():
        return int((time.time() - float(value[:-1]) * units[value[-1]]) * 1000)
    try:
        when = dt.datetime.fromisoformat(value)
    except ValueError:
        raise CliError(
            f"--since {value!r} is neither a duration like 30m/2h/7d nor an ISO date", Exit.USAGE
        ) from None
    if when.tzinfo is None:
        when = when.astimezone()
    return int(when.timestamp() * 1000)
