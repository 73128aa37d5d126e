"""A lean HTTP/1.1 client for the upstream hot path: asyncio.Protocol + httptools.

aiohttp spent ~250-320 µs of CPU per upstream POST here; this client does the
same job in a fraction of that (docs/performance.md) by doing only what the
gateway needs: POST with pre-encoded bytes, keep-alive pooling per origin,
gzip/deflate decoding, a connect timeout and a between-bytes read timeout.

Layers: `Response` and `Connection` (one exchange, providers/exchange.py),
`HostPool` (bounded keep-alive pool per origin, providers/pool.py) and
`HTTPClient` here (URL cache, request bytes, the one stale-connection retry).
Proxies and CA bundles come from `UpstreamNetwork` (providers/network.py).
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Mapping
from typing import NamedTuple
from urllib.parse import urlsplit

from tiergate.core.body_pieces import UpstreamBody
from tiergate.providers.exchange import (
    ClientTimeout,
    ConnectError,
    ConnectionClosed,
    ConnectTimeout,
    HTTPClientError,
    InvalidRequest,
    ProtocolError,
    ReadTimeout,
    Response,
    StaleConnection,
)
from tiergate.providers.network import Proxy, UpstreamNetwork
from tiergate.providers.pool import HostPool

__all__ = [
    "ClientTimeout",
    "ConnectError",
    "ConnectTimeout",
    "ConnectionClosed",
    "HTTPClient",
    "HTTPClientError",
    "InvalidRequest",
    "ProtocolError",
    "ReadTimeout",
    "Response",
    "StaleConnection",
]


class _Target(NamedTuple):
    origin: tuple[str, str, int]
    prefix: str  # request line, host and fixed headers
    proxy: Proxy | None  # the connections' first hop, when not direct


_FIXED = frozenset({"host", "content-length", "transfer-encoding", "connection"})


class HTTPClient:
    """POST over pooled keep-alive HTTP/1.1 connections. Create inside the running loop."""

    def __init__(
        self,
        *,
        connect_timeout: float | None = 10.0,
        read_timeout: float | None = 600.0,
        limit_per_host: int = 512,
        idle_timeout: float = 60.0,
        ssl_context: ssl.SSLContext | None = None,
        network: UpstreamNetwork | None = None,
    ) -> None:
        self.loop = asyncio.get_running_loop()
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        self.limit_per_host = limit_per_host
        self.idle_timeout = idle_timeout
        self._pools: dict[tuple[str, str, int], HostPool] = {}
        self._targets: dict[str, _Target] = {}
        self._heads: dict[tuple[object, ...], bytes] = {}
        self._ssl = ssl_context  # one context for every origin, else the network's
        self.network = network or UpstreamNetwork()  # default: direct, the system's CAs

    def ssl_context(self, host: str, port: int) -> ssl.SSLContext:
        if self._ssl is not None:
            return self._ssl
        return self.network.ssl_context(host, port)

    async def post(
        self,
        url: str,
        body: UpstreamBody,
        headers: Mapping[str, str],
        per_request: bytes = b"",
    ) -> Response:
        """Send a POST and return once the response head arrived (body not yet read).

        `body`: bytes, or pieces written with one vectored write (no join).
        `per_request`: raw header lines that change on every call (a `traceparent`),
        kept out of the cached head block. A reused connection the server had
        closed is retried once on a new one; nothing else is retried here."""
        target = self._target(url)
        key = (target.prefix, *headers.items())
        block = self._heads.get(key)
        if block is None:
            if len(self._heads) > 1024:
                self._heads.clear()
            block = self._heads[key] = _head(target.prefix, headers)
        size = len(body) if isinstance(body, bytes) else sum(map(len, body))
        head = b"%s%scontent-length: %d\r\n\r\n" % (block, per_request, size)
        pool = self._pools.get(target.origin)
        if pool is None:
            scheme, host, port = target.origin
            pool = self._pools[target.origin] = HostPool(
                self, host, port, scheme == "https", target.proxy
            )
        resp = (await pool.acquire()).send(head, body)
        try:
            await resp._wait_head()
        except StaleConnection:
            resp = (await pool.acquire(fresh=True)).send(head, body)
            await resp._wait_head()
        return resp

    async def close(self) -> None:
        """Close every pooled connection (in-flight exchanges fail)."""
        pools, self._pools = list(self._pools.values()), {}
        for pool in pools:
            pool.close()
        await asyncio.sleep(0)

    def connections(self) -> int:
        """Open connections over all origins (for tests and stats)."""
        return sum(len(p.conns) for p in self._pools.values())

    def _target(self, url: str) -> _Target:
        target = self._targets.get(url)
        if target is None:
            if len(self._targets) > 4096:
                self._targets.clear()
            target = self._targets[url] = _parse(url, self.network)
        return target


def _parse(url: str, network: UpstreamNetwork) -> _Target:
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as err:
        raise InvalidRequest(f"bad url: {err}") from None
    scheme, host = parts.scheme.lower(), parts.hostname
    if scheme not in ("http", "https") or not host:
        raise InvalidRequest("url must be http(s)://host/...")
    default = 443 if scheme == "https" else 80
    host_header = f"[{host}]" if ":" in host else host
    if port is not None and port != default:
        host_header += f":{port}"
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    if any(c in path for c in " \r\n"):
        raise InvalidRequest("url path has whitespace")
    proxy = network.proxy_for(scheme, host, port or default)
    if proxy is not None and scheme == "http":  # a plain-http proxy takes the absolute URL
        path = f"http://{host_header}{path}"
    prefix = f"POST {path} HTTP/1.1\r\nhost: {host_header}\r\nuser-agent: tiergate\r\n"
    if proxy is not None and scheme == "http" and proxy.authorization:
        prefix += f"proxy-authorization: {proxy.authorization}\r\n"
    return _Target((scheme, host, port or default), prefix, proxy)


def _head(prefix: str, headers: Mapping[str, str]) -> bytes:
    """Request line and headers but content-length: the caller's headers, then the
    defaults they did not set."""
    lines = []
    extra = {"content-type": "application/json", "accept-encoding": "gzip, deflate"}
    for name, value in headers.items():
        low = name.lower()
        if low in _FIXED:
            continue
        extra.pop(low, None)
        lines.append(f"{name}: {value}\r\n")
    lines.extend(f"{name}: {value}\r\n" for name, value in extra.items())
    block = "".join(lines)
    if block.count("\n") != len(lines) or block.count("\r") != len(lines):
        raise InvalidRequest("header name or value contains a line break")
    try:
        return f"{prefix}{block}".encode("latin-1")
    except UnicodeEncodeError:
        raise InvalidRequest("header is not latin-1") from None
