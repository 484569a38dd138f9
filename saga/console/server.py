"""Run the console under uvicorn on a socket bound here, so the URL printed is the one
served (port 0 picks a free port). Uvicorn's access log stays off: the audit log
says who did what, and no request line reaches the log."""

from __future__ import annotations

import socket
import sys

import structlog

from saga.config.settings import Settings
from saga.console.config import ConsoleConfig

log = structlog.get_logger("saga.console")


def bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


def url_of(sock: socket.socket, host: str) -> str:
    port = sock.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    if host in ("0.0.0.0", "::"):
        shown = "127.0.0.1"
    return f"http://{shown}:{port}/"


def serve(settings: Settings, config: ConsoleConfig) -> int:
    import uvicorn

    from saga.console.app import create_app
    from saga.wiring.logs import configure_logging

    configure_logging(settings.log_format, settings.log_level)
    sock = bind(config.settings.host, config.settings.port)
    url = url_of(sock, config.settings.host)
    print(f"saga console: {url}", flush=True)
    if config.dev:
        print(
            "saga console: --dev: no sign-in, everyone on this machine acts as an operator",
            file=sys.stderr,
            flush=True,
        )
    log.info("console_started", url=url, dev=config.dev, forward_auth=bool(
        config.settings.auth_header), token_file=bool(config.file_tokens))  # fmt: skip
    server = uvicorn.Server(
        uvicorn.Config(
            create_app(settings, config),
            log_config=None,
            access_log=False,
            proxy_headers=False,
            server_header=False,
            lifespan="on",
            timeout_graceful_shutdown=5,
        )
    )
    server.run(sockets=[sock])
    return 0
