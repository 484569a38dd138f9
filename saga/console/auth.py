"""Who is asking, and may they: bearer tokens, browser sessions, forward-auth, ``--dev``.

In order: an ``Authorization: Bearer`` header (a wrong one is a 401 whatever else
the request carries); the auth proxy's user header, when forward-auth is on and
the peer is a trusted proxy; the session cookie a sign-in set; ``--dev``'s
anonymous operator. Nothing else gets in.
"""

from __future__ import annotations

import hmac
import ipaddress
import re
import secrets
import time
from typing import Any

import msgspec

from saga.console.config import ConsoleConfig
from saga.console.errors import Forbidden, Unauthenticated
from saga.console.tokens import Role, Signer, digest, token_mac
from saga.state import console_auth as store
from saga.state.keys import Keys

SESSION_COOKIE = "saga_session"
_SUBJECT = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@+=:-]{0,127}")


class Identity(msgspec.Struct, frozen=True):
    subject: str
    """The token's name, the proxy's user, or ``dev``."""
    role: Role
    via: str
    """token | session | forward | dev"""

    @property
    def actor(self) -> str:
        """Who did it, as the saga's history and the audit log record it."""
        return f"console {self.subject}"

    @property
    def ambient(self) -> bool:
        """Credentials a browser sends by itself (cookies, a proxy's session, --dev):
        state-changing requests made with them need the CSRF check."""
        return self.via != "token"


class Access:
    """Authentication against one keyspace and one configuration."""

    def __init__(self, redis: Any, keys: Keys, config: ConsoleConfig) -> None:
        self.redis, self.keys, self.config = redis, keys, config

    async def identify(self, request: Any) -> Identity | None:
        header = request.headers.get("authorization")
        if header is not None:
            scheme, _, token = header.partition(" ")
            if scheme.lower() != "bearer" or not token.strip():
                raise Unauthenticated("the Authorization header must be 'Bearer <token>'")
            found = await self.token(token.strip())
            if found is None:
                raise Unauthenticated("the token is unknown, expired or revoked")
            return Identity(found[0], found[1], "token")
        forwarded = self._forwarded(request)
        if forwarded is not None:
            return forwarded
        session = request.cookies.get(SESSION_COOKIE)
        if session:
            found_session = await self._session(session)
            if found_session is not None:
                return found_session
        if self.config.dev:
            return Identity("dev", Role.OPERATOR, "dev")
        return None

    async def token(self, token: str) -> tuple[str, Role, str] | None:
        """(name, role, key) of a valid token: in the token file (by its sha256), or stored
        under its HMAC key with a MAC this console's secret vouches for, unexpired."""
        key = digest(token)
        if key in self.config.file_tokens:
            t = self.config.file_tokens[key]
            return t.name, t.role, key
        signer = self.config.signer
        if signer is None:  # --dev without a secret: no stored token is trusted
            return None
        key = signer.token_key(token)
        return await self._stored(signer, key)

    async def _stored(self, signer: Signer, key: str) -> tuple[str, Role, str] | None:
        stored = await store.token_by_digest(self.redis, self.keys, key)
        if stored is None or not verified(signer, stored):
            return None
        if stored.expires_ms and stored.expires_ms < _now_ms():
            return None
        return stored.name, Role(stored.role), key

    async def sign_in(self, token: str) -> tuple[str, Identity]:
        """A new session for a valid token: (cookie value, who)."""
        found = await self.token(token.strip())
        if found is None:
            raise Unauthenticated("that token is unknown, expired or revoked")
        name, role, key = found
        value = secrets.token_urlsafe(32)
        skey, now = self._session_key(value), _now_ms()
        session = store.StoredSession(
            subject=name, role=role.value, token_digest=key, created_ms=now,
            mac=self._session_mac(skey, name, role.value, key, now),
        )  # fmt: skip
        ttl = self.config.settings.session_ttl_s
        await store.open_session(self.redis, self.keys, skey, session, ttl)
        return value, Identity(name, role, "session")

    async def sign_out(self, cookie: str) -> None:
        await store.close_session(self.redis, self.keys, self._session_key(cookie))

    def _session_key(self, cookie: str) -> str:
        signer = self.config.signer
        return signer.session_key(cookie) if signer is not None else digest(cookie)

    def _session_mac(self, skey: str, subject: str, role: str, token: str, at: int) -> str:
        signer = self.config.signer
        return signer.mac(skey, subject, role, token, at) if signer is not None else ""

    async def _session(self, cookie: str) -> Identity | None:
        """The session's owner while its token is still valid (revoking a token ends
        every session opened with it), if this console's secret vouches for it."""
        skey = self._session_key(cookie)
        try:
            session = await store.get_session(self.redis, self.keys, skey)
        except msgspec.DecodeError:
            return None
        if session is None:
            return None
        s = session
        expected = self._session_mac(skey, s.subject, s.role, s.token_digest, s.created_ms)
        if not hmac.compare_digest(s.mac, expected):
            return None
        if s.token_digest not in self.config.file_tokens:
            signer = self.config.signer
            if signer is None or await self._stored(signer, s.token_digest) is None:
                return None
        return Identity(s.subject, Role(s.role), "session")

    def _forwarded(self, request: Any) -> Identity | None:
        s = self.config.settings
        if not s.auth_header or not self.from_trusted_proxy(request):
            return None
        user = (request.headers.get(s.auth_header) or "").strip()
        if not user:
            return None
        if _SUBJECT.fullmatch(user) is None:
            raise Unauthenticated(f"the auth proxy's {s.auth_header} header is not a usable name")
        groups = re.split(r"[,\s]+", request.headers.get(s.groups_header) or "")
        role = Role.VIEWER
        if s.operator_group in groups:
            role = Role.OPERATOR
        elif s.reviewer_group in groups:
            role = Role.REVIEWER
        return Identity(user, role, "forward")

    def from_trusted_proxy(self, request: Any) -> bool:
        peer = request.client.host if request.client else ""
        try:
            address = ipaddress.ip_address(peer)
        except ValueError:
            return False
        return any(address in n for n in self.config.trusted)


def verified(signer: Signer, t: store.StoredToken) -> bool:
    """Whether ``t`` was stored by a holder of this secret (its MAC matches its fields)."""
    expected = token_mac(signer, t.digest, t.name, t.role, t.created_ms, t.expires_ms)
    return hmac.compare_digest(t.mac, expected) and t.role in set(Role)


def require(identity: Identity | None, role: Role | tuple[Role, ...]) -> Identity:
    """``identity`` if its role allows ``role`` (or one of several)."""
    if identity is None:
        raise Unauthenticated("sign in with a console token")
    roles = role if isinstance(role, tuple) else (role,)
    if not any(identity.role.allows(r) for r in roles):
        needed = " or ".join(r.value for r in roles)
        raise Forbidden(f"this needs the {needed} role; you are signed in as {identity.role}")
    return identity


def _now_ms() -> int:
    return int(time.time() * 1000)
