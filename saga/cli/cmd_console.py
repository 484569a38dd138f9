"""saga console [--host H] [--port P] [--dev]  |  saga console token add|list|revoke"""

from __future__ import annotations

import argparse
from typing import Any

from saga.cli.common import CliError, Exit, check_redis, fmt_ms, print_json, run, table

ROLES = ("viewer", "reviewer", "operator", "producer")


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "console",
        help="the web console: sagas, timelines, queues, dead letters and costs in a browser",
        description=(
            "Serve the web console and its JSON API (/api/v1). People sign in with a "
            "token (`saga console token add`), or an auth proxy names them "
            "(SAGA_CONSOLE_AUTH_HEADER). Roles: viewer (ids, states, timings, errors, "
            "costs), operator (also outputs, retry, cancel, accept review, replay, purge) "
            "and producer (a service: starts sagas over HTTP and reads their state)."
        ),
        epilog="Needs the console extra: pip install 'saga-runner[console]'.",
    )
    p.add_argument("--host", help="address to listen on (SAGA_CONSOLE_HOST, default 127.0.0.1)")
    p.add_argument("--port", type=int, help="port (SAGA_CONSOLE_PORT, default 8090; 0: any)")
    p.add_argument(
        "--dev",
        action="store_true",
        help="no sign-in: everyone is an operator; loopback addresses only",
    )
    verbs = p.add_subparsers(dest="verb", metavar="<verb>")
    tokens = verbs.add_parser("token", help="add, list or revoke sign-in tokens")
    tverbs = tokens.add_subparsers(dest="token_verb", metavar="<add|list|revoke>", required=True)
    add = tverbs.add_parser("add", help="mint a token (printed once; only its hash is kept)")
    add.add_argument("name", help="who the token is for; recorded as the actor of actions")
    add.add_argument("--role", choices=ROLES, default="viewer", help="default viewer")
    add.add_argument("--expires", help="expire after T: 30m, 12h, 90d (default: never)")
    add.add_argument("--json", action="store_true")
    ls = tverbs.add_parser("list", help="tokens by name, role and expiry (never the secret)")
    ls.add_argument("--json", action="store_true")
    rm = tverbs.add_parser("revoke", help="delete a token; its browser sessions end too")
    rm.add_argument("name")
    rm.add_argument("--json", action="store_true")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    import msgspec

    from saga.config.settings import load_settings

    settings = load_settings()
    if args.verb == "token":
        return run(lambda: _tokens(settings, args))
    if args.port is not None and not 0 <= args.port <= 65535:
        raise CliError("--port must be between 0 and 65535.", Exit.USAGE)
    console = settings.console
    if args.host:
        console = msgspec.structs.replace(console, host=args.host)
    if args.port is not None:
        console = msgspec.structs.replace(console, port=args.port)
    try:
        import starlette  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError:
        raise CliError(
            "saga console needs the console extra: pip install 'saga-runner[console]'."
        ) from None
    from saga.console.config import build_config
    from saga.console.errors import ConsoleConfigError
    from saga.console.server import serve
    from saga.console.tokens import local_dir_of

    try:
        config = build_config(console, dev=args.dev, local_dir=local_dir_of(settings))
        signer = config.signer
        if signer is not None:  # a wrong secret: one sentence now, not a 401 per token
            run(lambda: _check_secret(settings, signer))
    except ConsoleConfigError as exc:
        raise CliError(f"{exc}.", Exit.USAGE) from None
    check_redis(settings)
    try:
        return serve(msgspec.structs.replace(settings, console=console), config)
    except OSError as exc:
        raise CliError(
            f"cannot listen on {console.host}:{console.port} ({exc.strerror or exc}); "
            "pick another --port.",
            Exit.USAGE,  # as a worker's taken health port: a setting to change
        ) from None
    except KeyboardInterrupt:
        return Exit.OK


async def _check_secret(settings: Any, signer: Any) -> None:
    from saga.console.tokens import check_secret
    from saga.wiring.runtime import client_for, keys_of

    async with client_for(settings) as client:
        await check_secret(client, keys_of(settings), signer)


async def _tokens(settings: Any, args: argparse.Namespace) -> int:
    import time

    from saga.console.auth import verified
    from saga.console.errors import ConsoleConfigError
    from saga.console.tokens import check_secret, signer_of
    from saga.state import console_auth
    from saga.wiring.runtime import client_for, keys_of

    try:
        signer = signer_of(settings)
    except ConsoleConfigError as exc:
        raise CliError(f"{exc}.", Exit.USAGE) from None
    async with client_for(settings) as client:
        keys = keys_of(settings)
        try:
            await check_secret(client, keys, signer)
        except ConsoleConfigError as exc:
            raise CliError(f"{exc}.", Exit.USAGE) from None
        if args.token_verb == "add":
            return await _add(client, keys, signer, args, int(time.time() * 1000))
        if args.token_verb == "list":
            found = [t for t in await console_auth.list_tokens(client, keys) if verified(signer, t)]
            if args.json:
                rows = [msgspec_dict(t) for t in found]
                print_json({"tokens": rows})
            elif not found:
                print("no console tokens; add one with `saga console token add NAME`")
            else:
                cells = [
                    [t.name, t.role, fmt_ms(t.created_ms), _expiry(t.expires_ms)] for t in found
                ]
                print(table(["name", "role", "created", "expires"], cells))
            return Exit.OK
        gone = await console_auth.revoke_token(client, keys, args.name)
        if args.json:
            print_json({"name": args.name, "revoked": gone})
        elif not gone:
            raise CliError(
                f"no console token is named {args.name!r}; see `saga console token list`."
            )
        else:
            print(f"token {args.name} revoked; its browser sessions end at their next request")
        return Exit.OK if gone else Exit.FAILED


async def _add(client: Any, keys: Any, signer: Any, args: argparse.Namespace, now_ms: int) -> int:
    from saga.cli.common import parse_since
    from saga.console.errors import ConsoleConfigError
    from saga.console.tokens import Role, add_stored_token
    from saga.state.ids import validate_id

    validate_id(args.name, "token name")
    ttl_s = (now_ms - parse_since(args.expires)) / 1000 if args.expires else 0
    if args.expires and ttl_s <= 0:
        raise CliError("--expires must be a duration like 30m, 12h or 90d.", Exit.USAGE)
    try:
        token = await add_stored_token(client, keys, args.name, Role(args.role),
                                       signer=signer, ttl_s=ttl_s, now_ms=now_ms)  # fmt: skip
    except ConsoleConfigError as exc:
        raise CliError(f"{exc}.") from None
    if args.json:
        print_json({"name": args.name, "role": args.role, "token": token})
    else:
        print(f"token for {args.name} ({args.role}); shown once, keep it secret:\n{token}")
    return Exit.OK


def msgspec_dict(t: Any) -> dict[str, Any]:
    import msgspec

    row: dict[str, Any] = msgspec.structs.asdict(t)
    row.pop("digest", None)
    row.pop("mac", None)
    return row


def _expiry(ms: int) -> str:
    return fmt_ms(ms) if ms else "never"
