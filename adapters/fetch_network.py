"""Document fetches connect only to addresses the fetch policy allows.

httpcore asks its network backend for every new connection (the first request,
each redirect to another origin, each reconnect). This backend resolves the host
itself, checks **every** address it resolves to (``FetchPolicy.check_address``),
then connects to one of those checked addresses, never to the name: a DNS
answer that changes between the check and the connection (rebinding) cannot
reach an address that was not checked. TLS still verifies the URL's host name
(httpcore passes it as the server name). Proxies from the environment are not
used for document fetches (the proxy's address would be the one checked).
"""

from __future__ import annotations

import socket
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import anyio
import httpcore
import httpx

from saga.adapters.fetch_policy import FetchPolicy

Resolver = Callable[[str, int], Awaitable[list[str]]]


async def resolve(host: str, port: int) -> list[str]:
    """The addresses ``host`` resolves to for TCP (an IP literal resolves to itself)."""
    try:
        infos = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise httpcore.ConnectError(f"cannot resolve {host} ({exc.strerror})") from None
    addresses: list[str] = []
    for info in infos:
        address = str(info[4][0])
        if address not in addresses:
            addresses.append(address)
    return addresses


class GuardedBackend(httpcore.AsyncNetworkBackend):
    """httpcore's anyio backend behind the policy's address check."""

    def __init__(self, policy: FetchPolicy, resolver: Resolver = resolve) -> None:
        self._inner = httpcore.AnyIOBackend()
        self._policy = policy
        self._resolve = resolver

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore's interface
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        try:
            with anyio.fail_after(timeout):
                addresses = await self._resolve(host, port)
        except TimeoutError:
            raise httpcore.ConnectTimeout(f"resolving {host} timed out") from None
        for address in addresses:  # all of them: refuse a host that mixes public and private
            self._policy.check_address(host, address)
        failure: Exception = httpcore.ConnectError(f"{host} resolves to no address")
        for address in addresses:
            try:
                return await self._inner.connect_tcp(
                    address, port, timeout, local_address, socket_options
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                failure = exc
        raise failure

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore's interface
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        raise httpcore.ConnectError("document fetches never use unix sockets")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


class GuardedTransport(httpx.AsyncHTTPTransport):
    """httpx's transport with its connection pool on the guarded backend.

    httpx takes no network backend, so the pool it made is replaced (``_pool`` is the
    attribute its request handling uses; httpx is bounded below 1.0 for this, and a test
    fails if a loopback address gets through)."""

    def __init__(self, policy: FetchPolicy, resolver: Resolver = resolve) -> None:
        super().__init__(trust_env=False)
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=httpx.create_ssl_context(trust_env=False),
            max_connections=100,
            max_keepalive_connections=20,
            keepalive_expiry=5.0,
            network_backend=GuardedBackend(policy, resolver),
        )
