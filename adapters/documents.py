"""Document sources behind the ``DocumentSource`` port: local paths, file:// and http(s)://.

What may be read at all is the fetch policy's decision (``fetch_policy``): it is
asked before a file is opened (and again about the file actually opened), before
each request and each redirect, and at every connection (``fetch_network``).

Failures map onto step errors so the executor knows what to do:

    missing file, HTTP 404/410              NotFoundError     dead letter at once
    HTTP 408/425/429, 5xx, timeouts,
    connection errors, other I/O errors     RetryableError    backoff and retry
    other 4xx, too many redirects,
    unreadable file                         PermanentError    dead letter at once
    over ``max_bytes``                      PayloadTooLargeError
    unsupported scheme, a directory         InvalidInputError
    refused by the fetch policy             PolicyError       dead letter at once

Error messages never name the path, URL, host or file name (they are often a
patient's name, and signed URLs carry tokens): they say ``DOCUMENT`` ("the saga's
document"). The path, or the URL without its query string and credentials, goes to
the error's ``detail``, which only operators see (sealed; see ``saga.steps.errors``).
A library's exception is named by its class, never by its message. No message quotes
the body.
"""

from __future__ import annotations

import mimetypes
import os
import re
import stat
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlsplit

import anyio.to_thread
import httpx

if TYPE_CHECKING:
    from saga.adapters.fetch_network import Resolver

from saga.adapters.fetch_policy import FetchPolicy, redact_url
from saga.steps.context import Document, DocumentSource
from saga.steps.errors import (
    DOCUMENT,
    InvalidInputError,
    NotFoundError,
    PayloadTooLargeError,
    PermanentError,
    PolicyError,
    RetryableError,
)

PDF_MAGIC = b"%PDF-"
OCTET_STREAM = "application/octet-stream"
_RETRYABLE_4XX = frozenset({408, 425, 429})
_FILENAME = re.compile(r"filename\*?=(?:UTF-8'')?\"?([^\";]+)\"?", re.IGNORECASE)


class DocumentFetcher:
    """Fetches what ``policy`` allows, by reference; one HTTP client reused for every fetch."""

    def __init__(
        self,
        *,
        max_bytes: int,
        policy: FetchPolicy,
        connect_timeout: float = 5.0,
        read_timeout: float = 30.0,
        max_redirects: int = 3,
        headers: Mapping[str, str] | None = None,
        resolver: Resolver | None = None,
    ) -> None:
        self.max_bytes = max_bytes
        self.max_redirects = max_redirects
        self.policy = policy
        self._timeout = httpx.Timeout(read_timeout, connect=connect_timeout)
        self._headers = dict(headers or {})
        self._resolver = resolver
        # Made at the first http(s) fetch: making one (CA bundle, httpcore) took ~50 ms
        # of every worker's start-up, though only the router fetches documents.
        self._client: httpx.AsyncClient | None = None

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            from saga.adapters.fetch_network import GuardedTransport, resolve

            self._client = httpx.AsyncClient(
                timeout=self._timeout,
                follow_redirects=False,  # followed by hand: the policy checks every hop
                headers=self._headers,
                transport=GuardedTransport(self.policy, self._resolver or resolve),
                trust_env=False,
            )
        return self._client

    async def __aenter__(self) -> DocumentFetcher:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the HTTP client and its pooled connections (if one was made)."""
        if self._client is not None:
            await self._client.aclose()

    async def fetch(self, ref: str) -> Document:
        """The document at ``ref``: a path, a file:// URL or an http(s):// URL."""
        parts = urlsplit(ref)
        scheme = parts.scheme.lower()
        if scheme in ("http", "https"):
            return await self._fetch_http(ref)
        if scheme == "file":
            if parts.netloc not in ("", "localhost"):
                raise InvalidInputError(
                    "file:// URLs must name a local file (no host)", detail=redact_url(ref)
                )
            path = Path(unquote(parts.path))
        elif not scheme:
            path = Path(ref)
        else:
            raise InvalidInputError(  # even the "scheme" can be a name: "Jo:report.pdf"
                "unsupported document scheme: use a path, file:// or http(s)://",
                detail=f"unsupported document scheme {scheme[:20]!r}",
            )
        return await anyio.to_thread.run_sync(self._read_file, path)

    def _read_file(self, path: Path) -> Document:
        real = self.policy.check_path(path)
        try:
            # O_NONBLOCK: a FIFO cannot block the open (and is refused below)
            fd = os.open(real, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
            try:
                content = self._read_open(path, fd)
            finally:
                os.close(fd)
        except FileNotFoundError:
            raise NotFoundError(f"no file at {DOCUMENT}", detail=f"no file at {path}") from None
        except PermissionError:
            raise PermanentError(
                f"permission denied reading {DOCUMENT}", detail=f"permission denied: {path}"
            ) from None
        except OSError as exc:  # EIO on a network mount and friends: worth another try
            why = exc.strerror or type(exc).__name__
            raise RetryableError(
                f"could not read {DOCUMENT} ({type(exc).__name__})",
                detail=f"could not read {path} ({why})",
            ) from None
        return Document(
            name=path.name, media_type=media_type_of(content, "", path.name), content=content
        )

    def _read_open(self, path: Path, fd: int) -> bytes:
        # The file actually opened is checked again: a directory swapped for a symlink
        # between the check and the open cannot lead outside the roots.
        opened = Path(f"/proc/self/fd/{fd}")
        if opened.is_symlink():
            self.policy.check_path(Path(os.readlink(opened)))
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise InvalidInputError(
                f"{DOCUMENT} is a directory, not a document", detail=f"{path} is a directory"
            )
        if not stat.S_ISREG(info.st_mode):
            raise InvalidInputError(
                f"{DOCUMENT} is not a regular file", detail=f"{path} is not a regular file"
            )
        if info.st_size > self.max_bytes:
            raise PayloadTooLargeError("document size in bytes", info.st_size, self.max_bytes)
        with open(fd, "rb", closefd=False) as handle:
            content = handle.read(self.max_bytes + 1)
        if len(content) > self.max_bytes:  # the file grew between stat and read
            raise PayloadTooLargeError("document size in bytes", len(content), self.max_bytes)
        return content

    async def _fetch_http(self, url: str) -> Document:
        shown = redact(url)  # for operators' details only
        hops = 0
        try:
            target = httpx.URL(url)
            for hops in range(self.max_redirects + 1):
                where = shown if hops == 0 else f"{redact(str(target))} (redirected from {shown})"
                try:
                    self.policy.check_url(str(target), label=_label(hops))
                    fetched = await self._get(target, hops)
                except PolicyError as exc:  # the URL's check, or its address's at connection
                    raise PolicyError(str(exc), detail=f"{exc.detail}; fetching {where}") from None
                if isinstance(fetched, Document):
                    return fetched
                target = fetched  # a redirect: checked at the top of the loop
            raise PermanentError(
                f"more than {self.max_redirects} redirects fetching {DOCUMENT}",
                detail=f"more than {self.max_redirects} redirects fetching {shown}",
            )
        except httpx.TimeoutException as exc:
            raise RetryableError(
                f"timed out fetching {_label(hops)} ({type(exc).__name__})",
                detail=f"timed out fetching {shown}",
            ) from None
        except (httpx.UnsupportedProtocol, httpx.InvalidURL) as exc:
            raise InvalidInputError(
                f"cannot fetch {_label(hops)} ({type(exc).__name__})",
                detail=f"cannot fetch {shown}",
            ) from None
        except httpx.HTTPError as exc:  # connection refused, reset, protocol errors
            raise RetryableError(
                f"could not fetch {_label(hops)} ({type(exc).__name__})",
                detail=f"could not fetch {shown}",
            ) from None

    async def _get(self, target: httpx.URL, hops: int) -> Document | httpx.URL:
        """The document at ``target``, or the URL its redirect points to."""
        async with self._http().stream("GET", target) as response:
            if response.next_request is not None:
                return response.next_request.url
            check_status(response.status_code, _label(hops), detail=redact(str(target)))
            content = await self._read_body(response)
            name = document_name(response.headers.get("content-disposition", ""), response.url)
            content_type = response.headers.get("content-type", "")
        return Document(
            name=name, media_type=media_type_of(content, content_type, name), content=content
        )

    async def _read_body(self, response: httpx.Response) -> bytes:
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self.max_bytes:
            raise PayloadTooLargeError("document size in bytes", int(declared), self.max_bytes)
        body = bytearray()
        async for chunk in response.aiter_bytes():
            body += chunk
            if len(body) > self.max_bytes:  # stop reading: the rest is not wanted
                raise PayloadTooLargeError("document size in bytes", len(body), self.max_bytes)
        return bytes(body)


def _label(hops: int) -> str:
    """How a message names the URL fetched after ``hops`` redirects (never the URL)."""
    return DOCUMENT if hops == 0 else f"the target of redirect {hops} of {DOCUMENT}"


def check_status(status: int, label: str = DOCUMENT, *, detail: str = "") -> None:
    """Raise the step error an HTTP status stands for; return on 2xx. ``detail`` (the
    redacted URL) goes to the operators' detail only."""
    if 200 <= status < 300:
        return
    said = f"HTTP {status} fetching {detail}" if detail else ""
    if status in (404, 410):
        raise NotFoundError(f"no document at {label} (HTTP {status})", detail=said)
    if status >= 500 or status in _RETRYABLE_4XX:
        raise RetryableError(f"HTTP {status} fetching {label}", detail=said)
    raise PermanentError(f"HTTP {status} fetching {label}", detail=said)


def redact(url: str) -> str:
    """``url`` without credentials, query string and fragment."""
    return redact_url(url)


def document_name(disposition: str, url: httpx.URL) -> str:
    """The file name from Content-Disposition, else the last segment of the URL path."""
    if match := _FILENAME.search(disposition):
        return Path(unquote(match.group(1))).name or "document"
    segments = [s for s in url.path.split("/") if s]
    return unquote(segments[-1]) if segments else (url.host or "document")


def media_type_of(content: bytes, content_type: str, name: str) -> str:
    """The PDF magic wins; then the Content-Type; then the file extension."""
    if content[:1024].lstrip().startswith(PDF_MAGIC):
        return "application/pdf"
    declared = content_type.split(";", 1)[0].strip().lower()
    if declared and declared != OCTET_STREAM:
        return declared
    guessed, _ = mimetypes.guess_type(name)
    return guessed or OCTET_STREAM


def as_document_source(fetcher: DocumentFetcher) -> DocumentSource:
    """``fetcher`` typed as the port (where mypy checks that it conforms)."""
    return fetcher
