"""DocumentFetcher against real files and a real local HTTP server (httpx is never mocked)."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from saga.adapters.documents import DocumentFetcher, media_type_of, redact
from saga.steps.errors import (
    InvalidInputError,
    NotFoundError,
    PayloadTooLargeError,
    PermanentError,
    RetryableError,
)
from tests.steps.conftest import LocalServer, Route, local_policy
from tests.steps.pdfgen import make_pdf

LIMIT = 64 * 1024


@pytest.fixture
async def fetcher(tmp_path: Path) -> AsyncIterator[DocumentFetcher]:
    policy = local_policy(tmp_path)
    async with DocumentFetcher(
        max_bytes=LIMIT, policy=policy, connect_timeout=2.0, read_timeout=0.5
    ) as f:
        yield f


@pytest.mark.anyio
async def test_local_path_reads_a_pdf_with_its_media_type(
    fetcher: DocumentFetcher, tmp_path: Path
) -> None:
    """A local path is read whole; the PDF magic sets the media type; the name is the file's."""
    path = tmp_path / "report.bin"
    path.write_bytes(make_pdf([["Glucose 99 mg/dL 70-99"]]))
    document = await fetcher.fetch(str(path))
    assert (document.name, document.media_type) == ("report.bin", "application/pdf")
    assert document.content == path.read_bytes()


@pytest.mark.anyio
async def test_file_url_reads_the_local_file(fetcher: DocumentFetcher, tmp_path: Path) -> None:
    """file:///path URLs (percent-encoded) read the same file as the plain path."""
    path = tmp_path / "lab notes.txt"
    path.write_text("Sodium 140 mmol/L 135-145")
    document = await fetcher.fetch(path.as_uri())
    assert (document.name, document.media_type) == ("lab notes.txt", "text/plain")


@pytest.mark.anyio
async def test_file_url_with_a_host_is_invalid(fetcher: DocumentFetcher) -> None:
    """A file:// URL naming a remote host is refused as invalid input."""
    with pytest.raises(InvalidInputError):
        await fetcher.fetch("file://fileserver/share/report.pdf")


@pytest.mark.anyio
async def test_missing_file_is_not_found(fetcher: DocumentFetcher, tmp_path: Path) -> None:
    """A path with no file behind it is a NotFoundError (dead letter at once)."""
    with pytest.raises(NotFoundError, match="no file at the saga's document") as caught:
        await fetcher.fetch(str(tmp_path / "nope.pdf"))
    assert "nope" not in str(caught.value) and str(tmp_path / "nope.pdf") in caught.value.detail


@pytest.mark.anyio
async def test_directory_is_invalid_input(fetcher: DocumentFetcher, tmp_path: Path) -> None:
    """A directory is not a document."""
    with pytest.raises(InvalidInputError, match="directory"):
        await fetcher.fetch(str(tmp_path))


@pytest.mark.anyio
async def test_file_over_the_byte_limit_is_refused_before_reading(
    fetcher: DocumentFetcher, tmp_path: Path
) -> None:
    """A file larger than max_bytes is a PayloadTooLargeError naming size and limit."""
    path = tmp_path / "big.txt"
    path.write_bytes(b"a" * (LIMIT + 1))
    with pytest.raises(PayloadTooLargeError) as caught:
        await fetcher.fetch(str(path))
    assert (caught.value.value, caught.value.limit) == (LIMIT + 1, LIMIT)


@pytest.mark.anyio
async def test_unsupported_scheme_is_invalid_input(fetcher: DocumentFetcher) -> None:
    """Only paths, file:// and http(s):// are supported."""
    with pytest.raises(InvalidInputError, match="unsupported document scheme: use") as caught:
        await fetcher.fetch("ftp://example.org/report.pdf")
    assert "'ftp'" in caught.value.detail


@pytest.mark.anyio
async def test_the_http_client_is_made_at_the_first_http_fetch_only(
    tmp_path: Path, http_server: LocalServer
) -> None:
    """Workers that never fetch over http (every step but the router) do not pay for an
    HTTP client at start-up; one fetcher reuses one client; closing an unused one is fine."""
    local = tmp_path / "r.txt"
    local.write_bytes(b"Ferritin 80 ng/mL")
    async with DocumentFetcher(max_bytes=LIMIT, policy=local_policy(tmp_path)) as unused:
        await unused.fetch(str(local))
        assert unused._client is None
    url = http_server.add("/doc", Route(body=b"ok", headers={"Content-Type": "text/plain"}))
    async with DocumentFetcher(max_bytes=LIMIT, policy=local_policy()) as fetcher:
        await fetcher.fetch(url)
        first = fetcher._client
        assert first is not None
        await fetcher.fetch(url)
        assert fetcher._client is first
    assert first.is_closed


@pytest.mark.anyio
async def test_http_ok_uses_content_type_and_disposition(
    fetcher: DocumentFetcher, http_server: LocalServer
) -> None:
    """A 200 answer gives the body, the Content-Type and the Content-Disposition name."""
    url = http_server.add(
        "/api/records/r1/document",
        Route(
            body=b"Ferritin 80 ng/mL 15-150",
            headers={
                "Content-Type": "text/plain; charset=utf-8",
                "Content-Disposition": 'attachment; filename="r1-labs.txt"',
            },
        ),
    )
    document = await fetcher.fetch(url)
    assert (document.name, document.media_type) == ("r1-labs.txt", "text/plain")
    assert document.content == b"Ferritin 80 ng/mL 15-150"


@pytest.mark.anyio
async def test_http_pdf_sniffed_when_served_as_octet_stream(
    fetcher: DocumentFetcher, http_server: LocalServer
) -> None:
    """An octet-stream body that starts with %PDF- is a PDF; the name is the last path segment."""
    url = http_server.add(
        "/files/report.pdf",
        Route(body=make_pdf([["x"]]), headers={"Content-Type": "application/octet-stream"}),
    )
    document = await fetcher.fetch(url)
    assert (document.name, document.media_type) == ("report.pdf", "application/pdf")


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("status", "error"),
    [
        (404, NotFoundError),
        (410, NotFoundError),
        (403, PermanentError),
        (400, PermanentError),
        (429, RetryableError),
        (500, RetryableError),
        (503, RetryableError),
    ],
)
async def test_http_status_maps_to_step_errors(
    fetcher: DocumentFetcher, http_server: LocalServer, status: int, error: type[Exception]
) -> None:
    """404/410 are not-found, other 4xx permanent, 429 and 5xx retryable."""
    url = http_server.add("/doc", Route(status, b"error page"))
    with pytest.raises(error) as caught:
        await fetcher.fetch(url)
    if error is PermanentError:
        assert not isinstance(caught.value, NotFoundError)


@pytest.mark.anyio
async def test_error_messages_hide_query_and_credentials(
    fetcher: DocumentFetcher, http_server: LocalServer
) -> None:
    """The message names no URL; the operator's detail names it without its token or
    user:password."""
    url = http_server.url("/missing?X-Signature=topsecret").replace("http://", "http://bob:pw@")
    with pytest.raises(NotFoundError) as caught:
        await fetcher.fetch(url)
    message, detail = str(caught.value), caught.value.detail
    assert message == "no document at the saga's document (HTTP 404)"
    assert "/missing" in detail
    for text in (message, detail):
        assert "topsecret" not in text and "bob" not in text and "pw@" not in text


@pytest.mark.anyio
async def test_redirects_within_the_limit_are_followed(
    fetcher: DocumentFetcher, http_server: LocalServer
) -> None:
    """Three redirects (the limit) still reach the document."""
    http_server.add("/final.txt", Route(body=b"Iron 90 ug/dL 60-170"))
    first = http_server.redirect_chain("/ok", 3, "/final.txt")
    assert (await fetcher.fetch(first)).content == b"Iron 90 ug/dL 60-170"


@pytest.mark.anyio
async def test_redirect_chain_over_the_limit_is_permanent(
    fetcher: DocumentFetcher, http_server: LocalServer
) -> None:
    """A fourth redirect is refused as a permanent error."""
    http_server.add("/final.txt", Route(body=b"x"))
    first = http_server.redirect_chain("/loop", 4, "/final.txt")
    with pytest.raises(PermanentError, match="more than 3 redirects"):
        await fetcher.fetch(first)
    assert "/final.txt" not in http_server.requests


@pytest.mark.anyio
async def test_declared_oversized_body_is_refused_unread(
    fetcher: DocumentFetcher, http_server: LocalServer
) -> None:
    """A Content-Length over the limit fails before the body is read."""
    url = http_server.add("/big", Route(body=b"a" * (LIMIT + 10)))
    with pytest.raises(PayloadTooLargeError) as caught:
        await fetcher.fetch(url)
    assert caught.value.value == LIMIT + 10


@pytest.mark.anyio
async def test_streamed_oversized_body_stops_past_the_limit(
    fetcher: DocumentFetcher, http_server: LocalServer
) -> None:
    """A body without Content-Length is read only until it passes the limit."""
    url = http_server.add("/stream", Route(stream_bytes=LIMIT * 50))
    with pytest.raises(PayloadTooLargeError) as caught:
        await fetcher.fetch(url)
    assert LIMIT < caught.value.value < LIMIT * 50


@pytest.mark.anyio
async def test_read_timeout_is_retryable(
    fetcher: DocumentFetcher, http_server: LocalServer
) -> None:
    """A server that never answers trips the read timeout: retryable."""
    url = http_server.add("/hang", Route(hang=True))
    with pytest.raises(RetryableError, match="timed out"):
        await fetcher.fetch(url)


@pytest.mark.anyio
async def test_connection_refused_is_retryable(fetcher: DocumentFetcher) -> None:
    """Nothing listening on the port: a retryable connection error."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(RetryableError, match="ConnectError"):
        await fetcher.fetch(f"http://127.0.0.1:{port}/doc.pdf")


def test_media_type_falls_back_to_the_extension() -> None:
    """Without magic or a useful Content-Type, the file extension decides."""
    assert media_type_of(b"abc", "application/octet-stream", "a.txt") == "text/plain"
    assert media_type_of(b"abc", "", "a.unknownext") == "application/octet-stream"
    assert media_type_of(b"\n%PDF-1.7", "text/plain", "a.txt") == "application/pdf"


def test_redact_drops_query_fragment_and_userinfo() -> None:
    """redact keeps scheme, host, port and path only."""
    assert redact("https://u:p@h.example:8443/a/b?sig=1#f") == "https://h.example:8443/a/b"
