"""The results endpoint (``SAGA_RESULTS_URL``): where the ``publish`` step posts a
record's grouped results, and whence its compensation retracts them.

- ``POST {url}`` with the JSON body and ``Idempotency-Key: <key>``: publish. The
  key is the publish step's idempotency key (``<record>:publish:e<epoch>``), so a
  re-run attempt of the same step publishes once on a server that honours the header.
- ``DELETE {url}/{record_id}`` with ``Idempotency-Key: <key of the publication>``:
  retract what that publication put there. 404 and 410 mean already gone: done.

Errors: 429, 5xx, timeouts and connection errors -> RetryableError; other 4xx ->
PermanentError. Response bodies are never logged (they may carry patient data).
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import quote

from saga.steps.errors import PermanentError, RetryableError

if TYPE_CHECKING:
    import httpx

__all__ = ["ResultsEndpoint"]

HEADER = "Idempotency-Key"


class ResultsEndpoint:
    """An HTTP client of one results URL; one connection pool per process, opened on
    first use (a CLI that only builds the pipeline never imports httpx)."""

    def __init__(self, url: str, *, timeout_s: float = 30.0) -> None:
        self.url = url.rstrip("/")
        self.timeout_s = timeout_s
        self._client: httpx.AsyncClient | None = None

    async def publish(self, key: str, body: bytes) -> int:
        """POST ``body`` under ``key``; returns the status."""
        headers = {HEADER: key, "Content-Type": "application/json"}
        res = await self._send("POST", self.url, headers, body)
        return res.status_code

    async def retract(self, record_id: str, key: str) -> int:
        """DELETE what the publication under ``key`` put there; returns the status."""
        url = f"{self.url}/{quote(record_id, safe='')}"
        res = await self._send("DELETE", url, {HEADER: key}, None, gone_ok=True)
        return res.status_code

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()

    async def _send(
        self, method: str, url: str, headers: dict[str, str], body: bytes | None, *,
        gone_ok: bool = False,
    ) -> httpx.Response:  # fmt: skip
        import httpx

        if self._client is None:
            self._client = httpx.AsyncClient(timeout=self.timeout_s)
        try:
            res = await self._client.request(method, url, headers=headers, content=body)
        except httpx.TransportError as exc:  # connect, read, timeouts
            raise RetryableError(f"results endpoint unreachable ({type(exc).__name__})") from None
        status = res.status_code
        if gone_ok and status in (404, 410):
            return res
        if status == 429 or status >= 500:
            raise RetryableError(f"results endpoint answered {method} with {status}")
        if status >= 400:
            raise PermanentError(f"results endpoint refused {method} with {status}")
        return res
