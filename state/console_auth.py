"""The web console's bearer tokens and browser sessions, as stored in Redis.

Only digests are stored: a token is kept as the sha256 hex of its value (a
field of one hash, ``Keys.console_tokens``), a session as a string under the
sha256 hex of its cookie value, expiring on its own. Whoever reads Redis learns
names and roles, never a credential. Hashing and roles are the console's
business (``saga.console.auth``); this module only stores and reads.
"""

from __future__ import annotations

from typing import Any

import msgspec

from saga.state.ids import validate_id
from saga.state.keys import Keys, validate_digest
from saga.state.replies import text


class StoredToken(msgspec.Struct, frozen=True, kw_only=True):
    """A console token as ``saga console token list`` shows it (no secret in it)."""

    name: str
    role: str
    created_ms: int
    expires_ms: int = 0
    """0: never expires."""
    digest: str = ""
    """sha256 hex of the token (filled in when read)."""


class StoredSession(msgspec.Struct, frozen=True, kw_only=True):
    """Who a browser session belongs to; the CSRF secret travels in its own cookie."""

    subject: str
    role: str
    token_digest: str
    """The token it was opened with: revoking that token ends the session."""
    created_ms: int


_TOKEN = msgspec.json.Decoder(StoredToken)
_SESSION = msgspec.json.Decoder(StoredSession)


async def add_token(client: Any, keys: Keys, digest: str, token: StoredToken) -> bool:
    """Store a token under its digest; False when a token of that name exists already."""
    validate_id(token.name, "token name")
    if any(t.name == token.name for t in await list_tokens(client, keys)):
        return False
    body = msgspec.json.encode(msgspec.structs.replace(token, digest=""))
    return bool(await client.hsetnx(keys.console_tokens(), validate_digest(digest), body))


async def list_tokens(client: Any, keys: Keys) -> list[StoredToken]:
    """Every stored token, by name."""
    raw = await client.hgetall(keys.console_tokens())
    found = [msgspec.structs.replace(_TOKEN.decode(v), digest=text(k)) for k, v in raw.items()]
    return sorted(found, key=lambda t: t.name)


async def token_by_digest(client: Any, keys: Keys, digest: str) -> StoredToken | None:
    raw = await client.hget(keys.console_tokens(), validate_digest(digest))
    return None if raw is None else msgspec.structs.replace(_TOKEN.decode(raw), digest=digest)


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


async def close_session(client: Any, keys: Keys, digest: str) -> None:
    await client.delete(keys.console_session(digest))
