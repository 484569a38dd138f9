"""``saga`` entry point: builds the parser from one module per command and maps
errors to exit codes (``saga.cli.common.Exit``: 0 ok, 1 failed, 2 usage or invalid
setting, 3 Redis unreachable, 4 not found, 5 timed out waiting, 6 completed but needs review
(``--wait``), 130 Ctrl-C, 141 stdout closed).

Command modules import nothing heavy at module level, so ``saga show --json``
starts without litellm, OpenTelemetry exporters or PDF parsing.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from saga.cli.common import CliError, Exit
from saga.cli.usage import SagaArgumentParser

if TYPE_CHECKING:
    from saga.state.connection import Failure

COMMANDS = (
    "start",
    "show",
    "retry",
    "cancel",
    "signal",
    "list",
    "review",
    "dlq",
    "top",
    "costs",
    "budget",
    "console",
    "worker",
    "up",
    "demo",
    "init",
    "server",
    "config",
    "bench",
    "eval",
    "controller",
    "partitions",
    "retention",
    "purge",
    "schedule",
    "export",
    "import",
    "keys",
    "migrate",
    "doctor",
)


def build_parser(only: str | None = None) -> SagaArgumentParser:
    """The parser of every command, or (``only``) of the one command a command line
    names: building all 29 costs ~20 ms of a cold start, and ``saga show`` needs one."""
    parser = SagaArgumentParser(
        prog="saga",
        description="Durable sagas for medical document pipelines on Redis.",
        epilog="Without REDIS_URL every command uses an embedded server under SAGA_DATA_DIR.",
    )
    sub = parser.add_subparsers(dest="command", metavar="<command>")
    for name in COMMANDS if only is None else (only,):
        try:
            module = importlib.import_module(f"saga.cli.cmd_{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"saga.cli.cmd_{name}":
                raise
            continue
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    code = _main(sys.argv[1:] if argv is None else list(argv))
    if argv is None:  # the process's own command line (the `saga` script): it ends next
        skip_the_last_collection()
    return code


def skip_the_last_collection() -> None:
    """Python's shutdown runs the cyclic garbage collector over every object still alive:
    after litellm's import (~3,000 modules, ~370k objects) that took ~1 s of the 6 s of
    `saga demo`. ``gc.freeze`` moves them all to the permanent generation, which shutdown
    does not collect; refcounted finalizers, atexit and the flush of stdout still run."""
    import gc

    gc.freeze()


def _main(argv: list[str]) -> int:
    parser = build_parser(named_command(argv))
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return Exit.USAGE
    try:
        code = int(args.func(args) or 0)
        sys.stdout.flush()  # a closed pipe shows here when the output was short
        return code
    except KeyboardInterrupt:
        return Exit.INTERRUPTED
    except Exception as exc:
        if stdout_closed(exc):
            return quiet_exit_on_closed_stdout()
        code, message = classify(leaf(exc))
        print(f"saga: {message}", file=sys.stderr)
        return code


def named_command(argv: Sequence[str]) -> str | None:
    """The command ``argv`` starts with, if it is one; else None (``saga``, ``saga -h``,
    a typo: the full parser lists or names every command)."""
    return argv[0] if argv and argv[0] in COMMANDS else None


def leaf(exc: BaseException) -> BaseException:
    """The first error inside (nested) exception groups, else ``exc`` itself."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def stdout_closed(exc: BaseException) -> bool:
    """True when ``exc`` is a broken pipe on stdout: its reader has gone (``| head -1``).
    A broken pipe to Redis arrives as redis-py's ConnectionError, never as this."""
    if not isinstance(leaf(exc), BrokenPipeError):
        return False
    import select

    try:
        poll = select.poll()
        poll.register(sys.stdout.fileno(), select.POLLOUT)
        return any(ev & (select.POLLERR | select.POLLHUP) for _, ev in poll.poll(0))
    except (OSError, ValueError):  # stdout already closed
        return True


def quiet_exit_on_closed_stdout() -> int:
    """The SIGPIPE convention: no message, exit 141. Python would complain when it
    flushes stdout at exit, so stdout is pointed at /dev/null first."""
    import os

    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return Exit.STDOUT_CLOSED


def classify(exc: BaseException) -> tuple[Exit, str]:
    """The exit code and the one sentence for an error."""
    from saga.adapters.embedded_redis import EmbeddedServerError
    from saga.config.settings import SettingsError
    from saga.state.connection import connection_failure
    from saga.state.errors import (
        DurabilityError,
        InvalidIdError,
        PartitionCountError,
        SagaNotFoundError,
        StateError,
        StepRemovedError,
    )

    if isinstance(exc, CliError):
        return exc.code, str(exc)
    refused = PartitionCountError | DurabilityError | StepRemovedError
    if isinstance(exc, InvalidIdError | SettingsError | refused):
        return Exit.USAGE, f"{exc}."
    if isinstance(exc, SagaNotFoundError):
        return Exit.NOT_FOUND, f"{exc}; check the id, or list sagas with `saga list`."
    if isinstance(exc, StateError):
        return Exit.FAILED, f"{exc}."
    if isinstance(exc, EmbeddedServerError):
        return Exit.UNREACHABLE, f"{exc}."
    from saga.state.scripts import ScriptsMissingError
    from saga.state.sealing import SealError

    if isinstance(exc, SealError):  # `saga export --decrypt` under another key
        return Exit.FAILED, f"{exc} (SAGA_DATA_KEYS or SAGA_DATA_KEY)."
    if isinstance(exc, ScriptsMissingError):  # Redis answers; an EVALSHA-only user waits
        return Exit.UNREACHABLE, f"{exc}."
    failure = connection_failure(exc)
    if failure is None:
        raise exc
    return _connection_sentence(*failure)


def _connection_sentence(failure: Failure, reason: str) -> tuple[Exit, str]:
    from saga.state.connection import Failure

    if failure == Failure.INVALID_URL:
        return Exit.USAGE, f"REDIS_URL={reason}; unset it to use the embedded server."
    if failure == Failure.AUTH:
        return Exit.USAGE, (
            f"Redis authentication failed ({reason}); check the user name and password "
            "in REDIS_URL (redis://user:password@host:port/db)."
        )
    if failure == Failure.PERMISSION:
        return Exit.USAGE, (
            f"the Redis user of REDIS_URL lacks a permission saga needs ({reason}); "
            "grant it streams, hashes, sorted sets and scripting on the saga keys."
        )
    if failure == Failure.NOT_REDIS:
        return Exit.UNREACHABLE, (
            f"the server at REDIS_URL does not speak the Redis protocol ({reason}); "
            "check the host and port in it."
        )
    return Exit.UNREACHABLE, (
        f"cannot reach Redis ({reason}); check REDIS_URL or run `saga server status`."
    )


if __name__ == "__main__":
    sys.exit(main())
