"""Checks of the Redis connection settings, so a bad one is one sentence at start-up:
TLS files only with ``rediss://``, certificate checks not switched off from the URL by
accident, and a reply timeout longer than a blocking read.

They raise ValueError; ``saga.config.settings.load_settings`` turns it into SettingsError."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

_INSECURE_QUERY = re.compile(
    r"(?i)[?&](ssl_cert_reqs=(none|optional)|ssl_check_hostname=(false|0|no|off))\b"
)


def redis_tls(
    url: str, env: Mapping[str, str], insecure: bool
) -> tuple[str | None, str | None, str | None]:
    """The TLS files for ``REDIS_URL``, checked: each exists, they go with ``rediss://``
    only, and certificate checks are not switched off from the URL unless
    ``SAGA_REDIS_TLS_INSECURE`` says so."""
    names = ("SAGA_REDIS_CA_FILE", "SAGA_REDIS_CERT_FILE", "SAGA_REDIS_KEY_FILE")
    if not url:  # the embedded server: a unix socket, no TLS to configure
        return None, None, None
    files = tuple(env.get(n, "").strip() or None for n in names)
    for name, path in zip(names, files, strict=True):
        if path is None:
            continue
        if not url.lower().startswith("rediss://"):
            raise ValueError(
                f"{name} is set but REDIS_URL is not a rediss:// URL; "
                "use rediss:// for TLS or unset it"
            )
        if not Path(path).is_file():
            raise ValueError(f"{name}={path!r} is not a readable file")
    if _INSECURE_QUERY.search(url) and not insecure:
        raise ValueError(
            "REDIS_URL turns off certificate checks (ssl_cert_reqs or ssl_check_hostname); "
            "remove it, or set SAGA_REDIS_TLS_INSECURE=1 if you really mean it"
        )
    return files  # type: ignore[return-value]


def check_reply_timeout(timeout_s: float, block_ms: float) -> None:
    """A blocking read lasts up to ``block_ms``: a shorter reply timeout would cut every
    idle read off and re-send it."""
    if timeout_s * 1000 <= block_ms:
        raise ValueError("SAGA_REDIS_TIMEOUT must be longer than SAGA_BLOCK_MS (blocking reads)")
