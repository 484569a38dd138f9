"""``saga`` entry point: builds the parser from one module per command and maps
errors to exit codes (0 ok, 1 failed, 2 usage, 3 Redis unreachable, 4 not found).

Command modules import nothing heavy at module level, so ``saga show --json``
starts without litellm, OpenTelemetry exporters or PDF parsing.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from saga.cli.common import CliError, Exit

COMMANDS = (
    "start",
    "show",
    "retry",
    "cancel",
    "list",
    "review",
    "dlq",
    "top",
    "costs",
    "worker",
    "up",
    "demo",
    "init",
    "server",
    "config",
    "bench",
    "eval",
    "controller",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="saga",
        description="Durable sagas for medical document pipelines on Redis.",
        epilog="Without REDIS_URL every command uses an embedded server under SAGA_DATA_DIR.",
    )
    sub = parser.add_subparsers(dest="command", metavar="<command>")
    for name in COMMANDS:
        try:
            module = importlib.import_module(f"saga.cli.cmd_{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"saga.cli.cmd_{name}":
                raise
            continue
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return Exit.USAGE
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        return 130
    except Exception as exc:
        code, message = classify(exc)
        print(f"saga: {message}", file=sys.stderr)
        return code


def classify(exc: BaseException) -> tuple[Exit, str]:
    """The exit code and the one sentence for an error."""
    from redis.exceptions import ConnectionError as RedisConnectionError
    from redis.exceptions import TimeoutError as RedisTimeoutError

    from saga.adapters.embedded_redis import EmbeddedServerError
    from saga.settings import SettingsError
    from saga.state.errors import InvalidIdError, SagaNotFoundError, StateError

    if isinstance(exc, CliError):
        return exc.code, str(exc)
    if isinstance(exc, InvalidIdError | SettingsError):
        return Exit.USAGE, f"{exc}."
    if isinstance(exc, SagaNotFoundError):
        return Exit.NOT_FOUND, f"{exc}; check the id, or list sagas with `saga list`."
    if isinstance(exc, StateError):
        return Exit.FAILED, f"{exc}."
    if isinstance(exc, RedisConnectionError | RedisTimeoutError | EmbeddedServerError | OSError):
        return Exit.UNREACHABLE, (
            f"cannot reach Redis ({type(exc).__name__}: {str(exc)[:200]}); "
            "check REDIS_URL or run `saga server status`."
        )
    raise exc


if __name__ == "__main__":
    sys.exit(main())
