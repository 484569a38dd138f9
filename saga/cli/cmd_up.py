"""saga up [module:app ...]: the cluster's topology on one machine — one worker process
per step of each saga type, and with --console the web console beside them."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from saga.cli.common import CliError, Exit, check_redis, run

UP_TOKEN_HOURS = 12

if TYPE_CHECKING:
    from saga.wiring.up import Unit


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "up",
        help="run one worker process per step against one Redis (Ctrl-C stops all)",
        description="Start N worker processes per step, as Kubernetes would, with their "
        "logs interleaved and prefixed; Ctrl-C (or SIGTERM) drains and stops them all. "
        "With --console, the web console too: its URL and a sign-in token are printed. "
        "Name apps (module:attribute) to run their steps; without one, the document "
        "pipeline (or SAGA_PIPELINE's).",
    )
    p.add_argument(
        "apps", nargs="*", metavar="module:app", help="saga.App(s) to run, e.g. myapp:app"
    )
    p.add_argument("--workers-per-step", type=int, default=1)
    p.add_argument("--steps", help="comma-separated steps (default: the whole pipeline)")
    p.add_argument(
        "--console",
        action="store_true",
        help=f"also serve the web console; prints its URL and an operator token valid "
        f"{UP_TOKEN_HOURS} h (revoked when saga up stops)",
    )
    p.add_argument("--console-port", type=int, help="the console's port (SAGA_CONSOLE_PORT)")
    p.add_argument(
        "--dev",
        action="store_true",
        help="with --console: no sign-in, everyone on this machine is an operator (loopback only)",
    )
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from saga.config.settings import load_settings
    from saga.wiring.runtime import redis_url
    from saga.wiring.up import run_up

    settings = load_settings()
    if args.dev and not args.console:
        raise CliError("--dev applies to --console only.", Exit.USAGE)
    units = _units(args, settings)
    url = redis_url(settings)  # start the embedded server once, before the workers
    check_redis(settings)  # one sentence for a bad REDIS_URL, not one per worker
    extra: dict[str, list[str]] = {}
    token_name = ""
    if args.console:
        extra["console"], token_name = _console(settings, args)
    try:
        code = run_up(units, args.workers_per_step, url, extra)
    finally:
        if token_name:
            run(lambda: _revoke(settings, token_name))
    return Exit.OK if code == 0 else Exit.FAILED


def _units(args: argparse.Namespace, settings: Any) -> list[Unit]:
    """One unit per step of each app named (the document pipeline without one)."""
    from saga.wiring.runtime import document_pipeline, load_pipeline
    from saga.wiring.up import Unit

    if args.workers_per_step < 1:
        raise CliError("--workers-per-step must be at least 1.", Exit.USAGE)
    only = args.steps.split(",") if args.steps else None
    units: list[Unit] = []
    for ref in args.apps or [""]:
        pipeline = load_pipeline(ref, settings) if ref else document_pipeline(settings)
        steps = only or list(pipeline.names)
        unknown = [s for s in steps if s not in pipeline.names]
        if ref and unknown:
            raise CliError(
                f"{ref} has no step {unknown[0]!r}; its steps: {', '.join(pipeline.names)}",
                Exit.USAGE,
            )
        label = f"{pipeline.name}/" if len(args.apps) > 1 else ""
        units += [Unit(f"{label}{s}", ref, s) for s in steps]
    return units


def _console(settings: Any, args: argparse.Namespace) -> tuple[list[str], str]:
    """The console's command line, after printing where to open it and how to sign in."""
    from saga.console.config import is_loopback

    host = settings.console.host
    port = settings.console.port if args.console_port is None else args.console_port
    argv = ["console", "--host", host, "--port", str(port)]
    shown = f"http://{host}:{port}/"
    if args.dev:
        if not is_loopback(host):
            raise CliError(f"--dev listens on loopback only, not on {host}.", Exit.USAGE)
        print(f"saga up: console at {shown} (--dev: no sign-in; anyone on this machine "
              "acts as an operator)", flush=True)  # fmt: skip
        return [*argv, "--dev"], ""
    settings = _with_local_secret(settings)
    name, token = run(lambda: _mint(settings))
    print(f"saga up: console at {shown}\nsaga up: sign in with this token (operator, valid "
          f"{UP_TOKEN_HOURS} h, revoked when saga up stops):\n{token}", flush=True)  # fmt: skip
    return argv, name


def _with_local_secret(settings: Any) -> Any:
    """Without SAGA_CONSOLE_SECRET(_FILE), a secret made once in the data dir, handed to the
    console process through SAGA_CONSOLE_SECRET_FILE (saga up is one machine's stack)."""
    import os

    import msgspec

    from saga.console.tokens import local_secret_file

    c = settings.console
    if c.secret or c.secret_file:
        return settings
    path = str(local_secret_file(settings.data_dir))
    os.environ["SAGA_CONSOLE_SECRET_FILE"] = path
    return msgspec.structs.replace(settings, console=msgspec.structs.replace(c, secret_file=path))


async def _mint(settings: Any) -> tuple[str, str]:
    import getpass
    import re
    import time

    from saga.console.tokens import Role, add_stored_token, signer_of
    from saga.state.console_auth import revoke_token
    from saga.wiring.runtime import client_for, keys_of

    name = "up-" + re.sub(r"[^A-Za-z0-9._-]", "-", getpass.getuser())[:60]
    from saga.console.errors import ConsoleConfigError

    try:
        signer = signer_of(settings)
    except ConsoleConfigError as exc:
        raise CliError(f"{exc}.", Exit.USAGE) from None
    async with client_for(settings) as client:
        keys = keys_of(settings)
        await revoke_token(client, keys, name)  # a token an earlier `saga up` left behind
        token = await add_stored_token(
            client, keys, name, Role.OPERATOR, signer=signer, ttl_s=UP_TOKEN_HOURS * 3600,
            now_ms=int(time.time() * 1000),
        )  # fmt: skip
    return name, token


async def _revoke(settings: Any, name: str) -> None:
    from saga.state.console_auth import revoke_token
    from saga.wiring.runtime import client_for, keys_of

    async with client_for(settings) as client:
        await revoke_token(client, keys_of(settings), name)
