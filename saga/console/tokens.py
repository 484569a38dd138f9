"""Console tokens: minting, digests, roles and the token file.

A token is ``saga_`` and 43 random URL-safe characters (256 bits). Only its
sha256 is kept, in Redis (``saga console token add``) or in a token file; a
token this long needs no slow hash.
"""

from __future__ import annotations

import hashlib
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


class Role(StrEnum):
    """What a person may do. ``viewer``: ids, states, timings, errors, costs; no document
    names, no outputs. ``operator``: also outputs, and every action."""

    VIEWER = "viewer"
    OPERATOR = "operator"

    def allows(self, needed: Role) -> bool:
        return self == Role.OPERATOR or needed == Role.VIEWER


class FileToken(msgspec.Struct, frozen=True):
    name: str
    role: Role


def mint() -> str:
    return PREFIX + secrets.token_urlsafe(32)


def digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def parse_role(value: str) -> Role:
    try:
        return Role(value)
    except ValueError:
        raise ConsoleConfigError(f"role {value!r} must be viewer or operator") from None


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


async def add_stored_token(
    client: Any, keys: Keys, name: str, role: Role, *, ttl_s: float = 0, now_ms: int
) -> str:
    """Mint a token, store its digest under ``name`` and return it (shown once)."""
    from saga.state.console_auth import StoredToken, add_token

    token = mint()
    expires = int(now_ms + ttl_s * 1000) if ttl_s else 0
    stored = StoredToken(name=name, role=role.value, created_ms=now_ms, expires_ms=expires)
    if not await add_token(client, keys, digest(token), stored):
        raise ConsoleConfigError(
            f"a token named {name!r} exists already; revoke it first or pick another name"
        )
    return token
