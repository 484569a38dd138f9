"""The web console's bearer tokens and browser sessions, as stored in Redis.

Only keyed digests are stored: a token is kept under the HMAC-SHA256 hex of its
value under the console's secret (a field of one hash, ``Keys.console_tokens``), a
session as a string under the HMAC hex of its cookie value, expiring on its own;
each entry carries a MAC of its fields. Whoever reads Redis learns names and roles,
never a credential; whoever writes it without the secret makes nothing the console
accepts. Keys, MACs and roles are the console's business (``saga.console.auth``);
this module only stores and reads.
"""

from __future__ import annotations

from typing import Any

import msgspec

from saga.state.ids import validate_id
from saga.state.keys import Keys
from saga.state.replies import text
from saga.state.shared_keys import validate_digest


class StoredToken(msgspec.Struct, frozen=True, kw_only=True):
    """A console token as ``saga console token list`` shows it (no secret in it)."""

    name: str
    role: str
    created_ms: int
    expires_ms: int = 0
    """0: never expires."""
    digest: str = ""
    """The HMAC hex key of the token (filled in when read)."""
    mac: str = ""
    """The console's MAC of key, name, role and times ("" in entries of older releases)."""


class StoredSession(msgspec.Struct, frozen=True, kw_only=True):
    """Who a browser session belongs to; the CSRF secret travels in its own cookie."""

    subject: str
    role: str
    token_digest: str
    """The token it was opened with: revoking that token ends the session."""
    created_ms: int
    mac: str = ""
    """The console's MAC of the session's key and fields."""


_TOKEN = msgspec.json.Decoder(StoredToken)
_SESSION = msgspec.json.Decoder(StoredSession)


async def add_token(client: Any, keys: Keys, digest: str, token: StoredToken) -> bool:
    """Store a token under its digest; False when a token of that name exists already."""
    validate_id(token.name, "token name")
    if any(t.name == token.name for t in await list_tokens(client, keys)):
        return False
    body = msgspec.json.encode(msgspec.structs.replace(token, digest=""))
    return bool(await client.hsetnx(keys.console_tokens(), validate_digest(digest), body))


def _token(key: Any, raw: Any) -> StoredToken | None:
    """A stored entry, or None when it is not one (anything with write access can add one)."""
    try:
        return msgspec.structs.replace(_TOKEN.decode(raw), digest=text(key))
    except msgspec.DecodeError:
        return None


async def list_tokens(client: Any, keys: Keys) -> list[StoredToken]:
    """Every stored entry that decodes, by name (the console tells which it vouches for)."""
    raw = await client.hgetall(keys.console_tokens())
    found = [t for t in (_token(k, v) for k, v in raw.items()) if t is not None]
    return sorted(found, key=lambda t: t.name)


async def token_by_digest(client: Any, keys: Keys, digest: str) -> StoredToken | None:
    raw = await client.hget(keys.console_tokens(), validate_digest(digest))
    return None if raw is None else _token(digest, raw)


async def revoke_token(client: Any, keys: Keys, name: str) -> int:
    """Delete the tokens called ``name``; returns how many there were. Sessions opened
    with them end at their next request (a session checks its token each time)."""
    gone = [t.digest for t in await list_tokens(client, keys) if t.name == name]
    if not gone:
        return 0
    return int(await client.hdel(keys.console_tokens(), *gone))


async def open_session(
    client: Any, keys: Keys, digest: str, session: StoredSession, ttl_s: int
) -> None:
    await client.set(keys.console_session(digest), msgspec.json.encode(session), ex=ttl_s)


async def get_session(client: Any, keys: Keys, digest: str) -> StoredSession | None:
    raw = await client.get(keys.console_session(digest))
    return None if raw is None else _SESSION.decode(raw)


async def check_secret(client: Any, keys: Keys, value: str) -> bool:
    """Store the console secret's check value if none is stored; True when the stored one
    is ``value`` (the console runs with the secret its tokens were made with)."""
    await client.set(keys.console_secret_check(), value, nx=True)
    return text(await client.get(keys.console_secret_check()) or b"") == value


async def close_session(client: Any, keys: Keys, digest: str) -> None:
    await client.delete(keys.console_session(digest))
