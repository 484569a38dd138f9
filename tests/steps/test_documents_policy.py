"""The fetch policy through the real fetcher: real files and symlinks, real HTTP servers on
loopback addresses, redirects, and the address check at connection time."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from saga.adapters.documents import DocumentFetcher
from saga.adapters.fetch_policy import FetchPolicy
from saga.steps.errors import InvalidInputError, PolicyError
from tests.steps.conftest import LocalServer, Route

pytestmark = pytest.mark.anyio

LIMIT = 64 * 1024
BODY = b"Ferritin 80 ng/mL 15-150"


def _fetcher(policy: FetchPolicy, **kw: object) -> DocumentFetcher:
    return DocumentFetcher(max_bytes=LIMIT, policy=policy, connect_timeout=2, **kw)  # type: ignore[arg-type]


@pytest.fixture
def other_server() -> Iterator[LocalServer]:
    """A second real server on another loopback address (127.0.0.2)."""
    server = LocalServer("127.0.0.2")
    server.start()
    yield server
    server.stop()


# -- local files ------------------------------------------------------------------------
async def test_a_private_file_outside_the_roots_is_refused(tmp_path: Path) -> None:
    """A mode-0600 file outside the roots is refused by path and by file:// URL, unread."""
    root = tmp_path / "docs"
    root.mkdir()
    secret = tmp_path / "secret.txt"
    secret.write_bytes(BODY)
    secret.chmod(0o600)
    async with _fetcher(FetchPolicy(roots=(str(root),))) as fetcher:
        for ref in (str(secret), secret.as_uri(), "/etc/passwd", str(root / ".." / "secret.txt")):
            with pytest.raises(PolicyError, match="outside the allowed document directories"):
                await fetcher.fetch(ref)


async def test_a_symlink_escaping_a_root_is_refused(tmp_path: Path) -> None:
    """A link inside a root that points outside it is refused; one that stays inside is read."""
    root = tmp_path / "docs"
    root.mkdir()
    (tmp_path / "secret.txt").write_bytes(b"not yours")
    (root / "report.txt").write_bytes(BODY)
    (root / "escape.txt").symlink_to(tmp_path / "secret.txt")
    (root / "alias.txt").symlink_to(root / "report.txt")
    (root / "subdir").symlink_to(tmp_path)
    async with _fetcher(FetchPolicy(roots=(str(root),))) as fetcher:
        assert (await fetcher.fetch(str(root / "alias.txt"))).content == BODY
        for ref in (root / "escape.txt", root / "subdir" / "secret.txt"):
            with pytest.raises(PolicyError, match="outside"):
                await fetcher.fetch(str(ref))


async def test_no_roots_means_no_local_documents(tmp_path: Path) -> None:
    """With no root (SAGA_DOCUMENT_ROOTS=none, or Kubernetes) no local path is read."""
    (tmp_path / "r.txt").write_bytes(BODY)
    async with _fetcher(FetchPolicy(url_prefixes=("https://",))) as fetcher:
        with pytest.raises(PolicyError, match="local documents are not allowed here"):
            await fetcher.fetch(str(tmp_path / "r.txt"))


async def test_a_fifo_in_a_root_is_refused_without_blocking(tmp_path: Path) -> None:
    """A named pipe is not a document; opening it must not wait for a writer."""
    os.mkfifo(tmp_path / "pipe")
    async with _fetcher(FetchPolicy(roots=(str(tmp_path),))) as fetcher:
        with pytest.raises(InvalidInputError, match="not a regular file"):
            await fetcher.fetch(str(tmp_path / "pipe"))


# -- URLs and addresses -------------------------------------------------------------
async def test_an_allowed_prefix_on_an_allowed_network_is_fetched(
    http_server: LocalServer,
) -> None:
    """A URL under an allowed prefix, on a network the deployment allows, is fetched."""
    url = http_server.add("/api/records/r1/document", Route(body=BODY))
    policy = FetchPolicy(
        template=http_server.url("/api/records/{record_id}/document"), networks=("127.0.0.1/32",)
    )
    async with _fetcher(policy) as fetcher:
        assert (await fetcher.fetch(url)).content == BODY


async def test_a_loopback_address_is_refused_unless_allowed(http_server: LocalServer) -> None:
    """The SSRF of issue 17: a URL to a loopback port is refused before anything is sent."""
    url = http_server.add("/", Route(body=b"+PONG"))
    async with _fetcher(FetchPolicy(url_prefixes=("http://",))) as fetcher:
        for ref in (url, url.replace("127.0.0.1", "localhost")):
            with pytest.raises(PolicyError, match="a loopback address") as caught:
                await fetcher.fetch(ref)
            assert "SAGA_DOCUMENT_NETWORKS" in str(caught.value)
    assert http_server.requests == []


async def test_a_url_under_no_prefix_is_refused_unsent(http_server: LocalServer) -> None:
    """A URL outside the allowed prefixes is refused before any connection."""
    url = http_server.add("/admin", Route(body=b"x"))
    policy = FetchPolicy(url_prefixes=(http_server.url("/docs/"),), networks=("127.0.0.0/8",))
    async with _fetcher(policy) as fetcher:
        with pytest.raises(PolicyError, match="under no allowed URL prefix"):
            await fetcher.fetch(url)
    assert http_server.requests == []


async def test_a_redirect_to_a_disallowed_address_is_refused(
    http_server: LocalServer, other_server: LocalServer
) -> None:
    """An allowed server that redirects to another loopback address (an internal service)
    is refused at the redirect; the internal service never sees a request."""
    internal = other_server.add("/", Route(body=b"+PONG"))
    first = http_server.add("/doc", Route(302, headers={"Location": internal}))
    policy = FetchPolicy(url_prefixes=("http://",), networks=("127.0.0.1/32",))
    async with _fetcher(policy) as fetcher:
        with pytest.raises(PolicyError, match="its host is a loopback address") as caught:
            await fetcher.fetch(first)
    assert "127.0.0" not in str(caught.value)  # hosts and URLs: the operator's detail only
    assert re.search(r"127\.0\.0\.2 .*redirected from http://127\.0\.0\.1", caught.value.detail)
    assert http_server.requests == ["/doc"] and other_server.requests == []


async def test_a_redirect_out_of_the_prefixes_is_refused(http_server: LocalServer) -> None:
    """A redirect from an allowed prefix to a path outside it is refused, naming both URLs."""
    http_server.add("/admin/keys", Route(body=b"secret"))
    first = http_server.add("/docs/r1", Route(302, headers={"Location": "/admin/keys"}))
    policy = FetchPolicy(url_prefixes=(http_server.url("/docs/"),), networks=("127.0.0.0/8",))
    async with _fetcher(policy) as fetcher:
        with pytest.raises(
            PolicyError, match="the target of redirect 1 of the saga's document"
        ) as c:
            await fetcher.fetch(first)
    assert "/docs" not in str(c.value) and "/admin" not in str(c.value)
    assert re.search(r"/admin/keys \(redirected from .*/docs/r1\)", c.value.detail)
    assert http_server.requests == ["/docs/r1"]


async def test_the_connection_goes_to_the_checked_address(http_server: LocalServer) -> None:
    """The fetcher resolves the name itself, checks the address, and connects to it: a name
    only our resolver knows still reaches the server (no second lookup to rebind)."""
    port = int(http_server.base.rsplit(":", 1)[1])
    http_server.add("/doc", Route(body=BODY))
    asked: list[str] = []

    async def resolver(host: str, _port: int) -> list[str]:
        asked.append(host)
        return ["127.0.0.1"]

    url = f"http://records.test:{port}/doc"
    policy = FetchPolicy(url_prefixes=(f"http://records.test:{port}/",), networks=("127.0.0.1/32",))
    async with _fetcher(policy, resolver=resolver) as fetcher:
        assert (await fetcher.fetch(url)).content == BODY
    assert asked == ["records.test"]


async def test_every_resolved_address_is_checked(http_server: LocalServer) -> None:
    """A name that resolves to a public and a private address is refused outright."""

    async def resolver(host: str, _port: int) -> list[str]:
        return ["93.184.215.14", "10.0.0.7"]

    async with _fetcher(FetchPolicy(url_prefixes=("http://",)), resolver=resolver) as fetcher:
        with pytest.raises(PolicyError, match="resolves to a private address") as caught:
            await fetcher.fetch("http://mixed.test/doc")
    assert "mixed.test" in caught.value.detail and "10.0.0.7" in caught.value.detail
