"""saga server status|start|stop: the embedded server used when REDIS_URL is unset."""

from __future__ import annotations

import argparse

from saga.cli.common import CliError, Exit, print_json


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("server", help="manage the embedded server (when REDIS_URL is unset)")
    p.add_argument("action", choices=["status", "start", "stop"])
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from saga.config.settings import load_settings
    from saga.wiring.runtime import embedded_server, ensure_embedded

    settings = load_settings()
    if settings.redis_url:
        raise CliError("REDIS_URL is set, so no embedded server is used", Exit.USAGE)
    server = embedded_server(settings)
    if args.action == "start":
        server = ensure_embedded(settings)
    elif args.action == "stop":
        was = server.running()
        server.stop()
        if not args.json:
            print(f"embedded server {'stopped' if was else 'was not running'}")
            return Exit.OK
    from saga.cli.shapes import ServerStatus

    running = server.running()
    malloc = server.allocator_in_use() if running else ""
    info = ServerStatus(
        running=running, url=server.url, data_dir=str(settings.data_dir), malloc=malloc
    )
    if args.json:
        print_json(info)
    else:
        state = "running" if running else "stopped"
        extra = f", malloc {malloc}" if running else ""
        print(f"embedded server {state} at {server.url} (data in {settings.data_dir}{extra})")
    return Exit.OK if running or args.action != "start" else Exit.FAILED
