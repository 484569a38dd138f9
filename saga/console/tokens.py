"""Console tokens: minting, digests, roles, the console's secret and the token file.

A token is ``saga_`` and 43 random URL-safe characters (256 bits); a token this long
needs no slow hash. A token file keeps its sha256. Redis keeps an HMAC-SHA256 of it
under the console's secret (``SAGA_CONSOLE_SECRET``, held by the console, never in
Redis), and each stored entry carries a MAC of its name, role and times: whoever can
write Redis but lacks the secret can neither add a token nor make a viewer an operator.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from enum import StrEnum
from pathlib import Path
from typing import Any

import msgspec

from saga.console.errors import ConsoleConfigError
from saga.state.errors import InvalidIdError
from saga.state.ids import validate_id
from saga.state.keys import Keys

PREFIX = "saga_"
MIN_LENGTH = 24
"""Shortest token a token file may hold (minted ones have 48 characters)."""
SECRET_MIN_LENGTH = 32
"""Shortest console secret (``SAGA_CONSOLE_SECRET``), in characters."""
LOCAL_SECRET_FILE = "console-secret"
"""With the embedded server (no ``REDIS_URL``), the secret made once in the data dir."""
_CHECK = b"saga console secret check v1"


class Role(StrEnum):
    """What a person may do. ``viewer``: ids, states, timings, errors, costs; no document
    names, no outputs. ``reviewer``: also a flagged saga's values beside their source
    page, and the review decisions (accept, correct, reject, add). ``operator``: also
    outputs, and every action. ``producer``: a service that starts sagas
    (``POST /api/v1/sagas``) and reads their state as a viewer sees one saga; nothing
    else (no lists, costs, outputs, reviews or actions)."""

    VIEWER = "viewer"
    REVIEWER = "reviewer"
    OPERATOR = "operator"
    PRODUCER = "producer"

    @property
    def rank(self) -> int:
        return _RANKS[self]

    def allows(self, needed: Role) -> bool:
        if self in (Role.OPERATOR, needed):
            return True
        if Role.PRODUCER in (self, needed):  # a producer reads no lists; only it starts
            return False
        return self.rank >= needed.rank


_RANKS = {Role.VIEWER: 0, Role.REVIEWER: 1, Role.OPERATOR: 2, Role.PRODUCER: -1}


class FileToken(msgspec.Struct, frozen=True):
    name: str
    role: Role


def mint() -> str:
    return PREFIX + secrets.token_urlsafe(32)


def digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class Signer:
    """HMAC-SHA256 under the console's secret: the keys tokens and sessions are stored
    under, and the MACs that vouch for what is stored there."""

    def __init__(self, secret: bytes) -> None:
        self._secret = secret

    def _hmac(self, kind: bytes, value: str) -> str:
        return hmac.new(self._secret, kind + b"\0" + value.encode(), hashlib.sha256).hexdigest()

    def token_key(self, token: str) -> str:
        return self._hmac(b"token", token)

    def session_key(self, cookie: str) -> str:
        return self._hmac(b"session", cookie)

    def mac(self, *fields: object) -> str:
        """A MAC of a stored entry's fields (its key first), so none can be changed."""
        return self._hmac(b"entry", "\0".join(str(f) for f in fields))

    def check_value(self) -> str:
        """Stored once (``Keys.console_secret_check``): another secret is told at start."""
        return hmac.new(self._secret, _CHECK, hashlib.sha256).hexdigest()

    def __repr__(self) -> str:  # never the secret, in a traceback or a log
        return "Signer(***)"


def load_secret(secret: str, secret_file: str, local_dir: Path | None) -> Signer:
    """The console's secret: ``SAGA_CONSOLE_SECRET``, else ``SAGA_CONSOLE_SECRET_FILE``, else
    (embedded server only: ``local_dir`` is its data dir) a file made there once."""
    if not secret and secret_file:
        try:
            secret = Path(secret_file).read_text().strip()
        except OSError as exc:
            raise ConsoleConfigError(
                f"cannot read SAGA_CONSOLE_SECRET_FILE {secret_file} ({exc.strerror or exc})"
            ) from None
    if not secret and local_dir is not None:
        secret = _local_secret(local_dir / LOCAL_SECRET_FILE)
    if not secret:
        raise ConsoleConfigError(
            "SAGA_CONSOLE_SECRET is not set: the console keys its tokens with a secret only "
            "it holds; set it (or SAGA_CONSOLE_SECRET_FILE) to at least "
            f"{SECRET_MIN_LENGTH} random characters"
        )
    if len(secret) < SECRET_MIN_LENGTH:
        raise ConsoleConfigError(
            f"SAGA_CONSOLE_SECRET must be at least {SECRET_MIN_LENGTH} characters long, "
            f"not {len(secret)}"
        )
    return Signer(secret.encode())


def signer_of(settings: Any) -> Signer:
    """The console's secret from ``Settings`` (the embedded server's data dir for a
    local run without one)."""
    c = settings.console
    local = settings.data_dir if settings.redis_url is None else None
    return load_secret(c.secret, c.secret_file, local)


def local_dir_of(settings: Any) -> Path | None:
    return settings.data_dir if settings.redis_url is None else None


async def check_secret(client: Any, keys: Keys, signer: Signer) -> None:
    """Refuse a secret other than the one this keyspace's tokens were made with."""
    from saga.state.console_auth import check_secret as stored_check

    if not await stored_check(client, keys, signer.check_value()):
        raise ConsoleConfigError(
            "SAGA_CONSOLE_SECRET is not the secret this keyspace's console tokens were made "
            f"with; set that one, or delete {keys.console_tokens()} and "
            f"{keys.console_secret_check()} and mint new tokens (docs/security.md)"
        )


def local_secret_file(data_dir: Path) -> Path:
    """The data dir's console secret file, made if missing (``saga up`` shares it with the
    console it starts)."""
    path = data_dir / LOCAL_SECRET_FILE
    _local_secret(path)
    return path


def _local_secret(path: Path) -> str:
    """Read, or make (mode 0600), a local console secret."""
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    value = secrets.token_urlsafe(32)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another process made it first
        return path.read_text().strip()
    with os.fdopen(fd, "w") as f:
        f.write(value + "\n")
    return value


def parse_role(value: str) -> Role:
    try:
        return Role(value)
    except ValueError:
        raise ConsoleConfigError(
            f"role {value!r} must be viewer, reviewer, operator or producer"
        ) from None


def read_token_file(path: str) -> dict[str, FileToken]:
    """Digest -> token from a file of ``<name> <role> <token>`` lines (``sha256:<hex>``
    instead of the token keeps the file free of secrets); ``#`` starts a comment."""
    try:
        lines = Path(path).read_text().splitlines()
    except OSError as exc:
        raise ConsoleConfigError(
            f"cannot read the token file {path} ({exc.strerror or exc})"
        ) from None
    found: dict[str, FileToken] = {}
    for n, raw in enumerate(lines, 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.split()
        if len(parts) != 3:
            raise ConsoleConfigError(
                f"{path} line {n}: expected '<name> <role> <token>', got {len(parts)} field(s)"
            )
        name, role, secret = parts
        try:
            validate_id(name, "token name")
        except InvalidIdError as exc:
            raise ConsoleConfigError(f"{path} line {n}: {exc}") from None
        if not secret.startswith("sha256:") and len(secret) < MIN_LENGTH:
            raise ConsoleConfigError(
                f"{path} line {n}: a token must be at least {MIN_LENGTH} characters long"
            )
        key = secret.removeprefix("sha256:") if secret.startswith("sha256:") else digest(secret)
        if len(key) != 64 or any(c not in "0123456789abcdef" for c in key):
            raise ConsoleConfigError(f"{path} line {n}: the sha256 digest must be 64 hex digits")
        found[key] = FileToken(name, parse_role(role))
    return found


def token_mac(signer: Signer, key: str, name: str, role: str, created: int, expires: int) -> str:
    return signer.mac(key, name, role, created, expires)


async def add_stored_token(
    client: Any,
    keys: Keys,
    name: str,
    role: Role,
    *,
    signer: Signer,
    ttl_s: float = 0,
    now_ms: int,
) -> str:
    """Mint a token, store it under its HMAC key as ``name`` and return it (shown once)."""
    from saga.state.console_auth import StoredToken, add_token

    await check_secret(client, keys, signer)
    token = mint()
    key = signer.token_key(token)
    expires = int(now_ms + ttl_s * 1000) if ttl_s else 0
    mac = token_mac(signer, key, name, role.value, now_ms, expires)
    stored = StoredToken(name=name, role=role.value, created_ms=now_ms, expires_ms=expires, mac=mac)
    if not await add_token(client, keys, key, stored):
        raise ConsoleConfigError(
            f"a token named {name!r} exists already; revoke it first or pick another name"
        )
    return token
