"""Which documents a worker may read: decided here, and nowhere else.

A worker reads a document only when the deployment allows it:

- **local paths** (and ``file://`` URLs) only inside a local root
  (``SAGA_DOCUMENT_ROOTS``, plus the directory of a path ``SAGA_DOCUMENT_SOURCE``),
  after symlinks are resolved, so a link cannot lead out of a root;
- **http(s) URLs** only under an allowed prefix (``SAGA_DOCUMENT_URL_PREFIXES``,
  plus the part of a URL ``SAGA_DOCUMENT_SOURCE`` before ``{record_id}``); every
  redirect target is checked again;
- and only to **public addresses**: every address a host name resolves to is
  checked when the connection is made, and the connection goes to the address
  that was checked (``fetch_network``), so DNS cannot answer one address to the
  check and another to the connection. Loopback, private, link-local, multicast
  and other non-public addresses need their network in ``SAGA_DOCUMENT_NETWORKS``.

Refusals are ``PolicyError`` (permanent: dead-lettered at once) with one sentence
that names the setting to change and never the path, URL or host (they can name a
patient); those go to the error's operator-only detail (``saga.steps.errors``).
``saga.config.settings`` builds the policy once.
"""

from __future__ import annotations

import ipaddress
from pathlib import Path
from urllib.parse import SplitResult, unquote, urlsplit

import msgspec

from saga.steps.errors import DOCUMENT, PolicyError

PLACEHOLDER = "{record_id}"
_WEB = ("http", "https")
_DEFAULT_PORTS = {"http": 80, "https": 443}

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class FetchPolicy(msgspec.Struct, frozen=True, kw_only=True):
    """What a worker may fetch. Empty lists allow nothing of their kind."""

    template: str = ""
    """``SAGA_DOCUMENT_SOURCE``: its own prefix (URL) or directory (path) is allowed."""
    url_prefixes: tuple[str, ...] = ()
    """``SAGA_DOCUMENT_URL_PREFIXES``: ``https://host[:port]/path/``; ``https://`` alone
    allows any host (still public addresses only)."""
    roots: tuple[str, ...] = ()
    """``SAGA_DOCUMENT_ROOTS``: absolute directories local documents must be inside."""
    networks: tuple[str, ...] = ()
    """``SAGA_DOCUMENT_NETWORKS``: non-public networks (CIDR) a URL may reach."""

    def check_url(self, url: str, *, label: str = DOCUMENT) -> None:
        """Raise PolicyError unless ``url`` is an http(s) URL under an allowed prefix.

        ``label`` names the URL in the message (``DOCUMENT``, or the hop of a redirect):
        the URL itself goes only to the operators' detail, without its query."""
        parts = urlsplit(url)
        seen = f"fetching {redact_url(url)}"
        if parts.scheme not in _WEB:
            raise PolicyError(
                f"{label} is not an http(s) URL; documents are fetched over http(s)",
                detail=f"{seen}: not http(s)",
            )
        prefixes = self.all_prefixes()
        if not prefixes:
            raise PolicyError(
                f"fetching {label} refused: no URL is allowed here; "
                "allow a prefix with SAGA_DOCUMENT_URL_PREFIXES",
                detail=f"{seen} refused: no URL prefix is allowed",
            )
        if has_dot_segments(parts.path):
            raise PolicyError(
                f"fetching {label} refused: its path has '.' or '..' segments",
                detail=f"{seen} refused: dot segments",
            )
        if not any(under_prefix(parts, prefix) for prefix in prefixes):
            raise PolicyError(
                f"fetching {label} refused: it is under no allowed URL prefix "
                "(SAGA_DOCUMENT_URL_PREFIXES)",
                detail=f"{seen} refused: under none of {', '.join(prefixes)}",
            )

    def check_path(self, path: Path) -> Path:
        """``path`` with symlinks resolved; PolicyError unless it is inside a root. The
        message names no path (it is often a patient's name); the detail does."""
        roots = self.all_roots()
        if not roots:
            raise PolicyError(
                f"reading {DOCUMENT} refused: local documents are not allowed here "
                "(SAGA_DOCUMENT_ROOTS names no directory)",
                detail=f"reading {path} refused: no document root",
            )
        try:
            real = path.resolve()
        except (OSError, RuntimeError):  # a symlink loop (RuntimeError before 3.13)
            raise PolicyError(
                f"reading {DOCUMENT} refused: its path does not resolve",
                detail=f"reading {path} refused: it does not resolve",
            ) from None
        if not any(real.is_relative_to(root) for root in roots):
            raise PolicyError(
                f"reading {DOCUMENT} refused: it is outside the allowed document directories "
                "(SAGA_DOCUMENT_ROOTS)",
                detail=f"reading {path} (resolved: {real}) refused: outside "
                f"{', '.join(map(str, roots))}",
            )
        return real

    def check_address(self, host: str, address: str) -> None:
        """PolicyError unless ``address`` (one of ``host``'s) is public or in an allowed network."""
        ip = _ip(address)
        if is_public(ip) or any(ip in ipaddress.ip_network(n) for n in self.networks):
            return
        kind = address_kind(ip)
        what = "its host is" if host == address else "its host resolves to"
        raise PolicyError(
            f"fetching {DOCUMENT} refused: {what} a {kind} address; "
            "allow its network with SAGA_DOCUMENT_NETWORKS",
            detail=f"fetching from {host} refused: it resolves to {ip}, a {kind} address",
        )

    def all_prefixes(self) -> tuple[str, ...]:
        own = template_prefix(self.template)
        is_url = urlsplit(own).scheme in _WEB
        return (*self.url_prefixes, own) if is_url else self.url_prefixes

    def all_roots(self) -> tuple[Path, ...]:
        own = urlsplit(template_prefix(self.template))
        roots = [Path(root) for root in self.roots]
        if own.scheme == "file":
            roots.append(Path(unquote(own.path)).resolve())
        elif own.path and not own.scheme:
            roots.append(Path(own.path).resolve())
        return tuple(roots)


def build_policy(
    *, template: str, url_prefixes: str, roots: str | None, networks: str, default_roots: list[Path]
) -> FetchPolicy:
    """The policy from the settings' raw strings (comma-separated lists); ValueError names
    the variable and the bad item. ``roots`` None (unset) means ``default_roots``; the
    word ``none`` means no local documents at all."""
    prefixes = tuple(_items(url_prefixes))
    for prefix in prefixes:
        parts = urlsplit(prefix)
        if parts.scheme not in _WEB or parts.query or parts.fragment:
            raise ValueError(
                f"SAGA_DOCUMENT_URL_PREFIXES item {prefix!r} must be an http(s) URL prefix "
                "without query or fragment"
            )
    if roots is None:
        chosen = default_roots
    elif roots.strip().lower() == "none":
        chosen = []
    else:
        chosen = [Path(item).expanduser() for item in _items(roots)]
    for net in _items(networks):
        try:
            ipaddress.ip_network(net, strict=False)
        except ValueError:
            raise ValueError(f"SAGA_DOCUMENT_NETWORKS item {net!r} is not a network") from None
    return FetchPolicy(
        template=template,
        url_prefixes=prefixes,
        roots=tuple(str(root.resolve()) for root in chosen),
        networks=tuple(str(ipaddress.ip_network(n, strict=False)) for n in _items(networks)),
    )


def _items(raw: str) -> list[str]:
    return [item.strip() for item in raw.split(",") if item.strip()]


def template_prefix(template: str) -> str:
    """The part of a template before ``{record_id}``, cut after its last ``/`` ("" if none)."""
    head = template.split(PLACEHOLDER, 1)[0] if PLACEHOLDER in template else ""
    return head[: head.rfind("/") + 1]


def under_prefix(url: SplitResult, prefix: str) -> bool:
    """Same scheme, host and port as ``prefix`` (any host if it names none), and a path
    inside the prefix's path at a segment boundary."""
    want = urlsplit(prefix)
    if url.scheme != want.scheme:
        return False
    if want.hostname is not None and (url.hostname != want.hostname or _port(url) != _port(want)):
        return False
    path, base = url.path or "/", want.path or "/"
    if base.endswith("/"):
        return path.startswith(base)
    return path == base or path.startswith(base + "/")


def has_dot_segments(path: str) -> bool:
    """``.`` or ``..`` segments (also percent-encoded, or split by backslashes), which a
    server may collapse to leave a prefix."""
    decoded = unquote(unquote(path)).replace("\\", "/")
    return any(segment in (".", "..") for segment in decoded.split("/"))


def is_public(ip: IPAddress) -> bool:
    return ip.is_global and not ip.is_multicast


def address_kind(ip: IPAddress) -> str:
    for kind in ("loopback", "link_local", "multicast", "unspecified", "private", "reserved"):
        if getattr(ip, f"is_{kind}"):
            return kind.replace("_", "-")
    return "non-public"


def _ip(address: str) -> IPAddress:
    ip = ipaddress.ip_address(address.split("%", 1)[0])  # drop an IPv6 zone
    mapped = getattr(ip, "ipv4_mapped", None)
    return mapped if mapped is not None else ip


def _port(parts: SplitResult) -> int | None:
    try:
        return parts.port or _DEFAULT_PORTS.get(parts.scheme)
    except ValueError:  # a port that is not a number: matches nothing
        return -1


def redact_url(url: str) -> str:
    """``url`` without credentials, query string and fragment (for operators' details)."""
    parts = urlsplit(url)
    try:
        host, port = parts.hostname or "", parts.port
    except ValueError:  # a port that is not a number
        host, port = parts.hostname or "", None
    netloc = f"{host}:{port}" if port else host
    return parts._replace(netloc=netloc, query="", fragment="").geturl()
