"""The console's configuration: settings (``SAGA_CONSOLE_*``) with the command line's
overrides, checked once at start so a bad value is one sentence, not a traceback."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field

from saga.console.errors import ConsoleConfigError
from saga.console.tokens import FileToken, read_token_file
from saga.settings import ConsoleSettings

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


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def build_config(settings: ConsoleSettings, *, dev: bool = False) -> ConsoleConfig:
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
    return ConsoleConfig(settings=settings, dev=dev, file_tokens=tokens, trusted=trusted)
