"""The console's configuration: settings (``SAGA_CONSOLE_*``) with the command line's
overrides, checked once at start so a bad value is one sentence, not a traceback."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from pathlib import Path

from saga.config.groups import ConsoleSettings
from saga.console.errors import ConsoleConfigError
from saga.console.tokens import FileToken, Signer, load_secret, read_token_file

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True)
class ConsoleConfig:
    settings: ConsoleSettings
    dev: bool = False
    """Anonymous access as an operator: loopback only, for one person's machine."""
    file_tokens: dict[str, FileToken] = field(default_factory=dict)
    """Digest -> token, from ``SAGA_CONSOLE_TOKEN_FILE``."""
    trusted: tuple[Network, ...] = ()
    """Peers whose forward-auth headers are believed."""
    signer: Signer | None = None
    """The console's secret (``SAGA_CONSOLE_SECRET``); None only with ``--dev`` and no
    secret set, when tokens stored in Redis are not accepted."""


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def build_config(
    settings: ConsoleSettings, *, dev: bool = False, local_dir: Path | None = None
) -> ConsoleConfig:
    """``local_dir``: the embedded server's data dir (no ``REDIS_URL``), where a console
    secret is made once when none is set."""
    if dev and not is_loopback(settings.host):
        raise ConsoleConfigError(
            f"--dev turns sign-in off, so it listens on loopback only, not on "
            f"{settings.host}; drop --dev and sign in with a token (saga console token add)"
        )
    try:
        trusted = tuple(ipaddress.ip_network(n, strict=False) for n in settings.trusted_proxies)
    except ValueError as exc:
        raise ConsoleConfigError(f"SAGA_CONSOLE_TRUSTED_PROXIES: {exc}") from None
    tokens = read_token_file(settings.token_file) if settings.token_file else {}
    signer = None
    if not dev or settings.secret or settings.secret_file or local_dir is not None:
        signer = load_secret(settings.secret, settings.secret_file, local_dir)
    return ConsoleConfig(
        settings=settings, dev=dev, file_tokens=tokens, trusted=trusted, signer=signer
    )
