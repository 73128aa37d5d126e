"""How upstream connections reach the provider: proxies and trusted CAs.

Corporate networks reach the internet through an HTTP proxy and re-sign TLS
with their own CA. The upstream client (providers/client.py) therefore
honours the conventional environment, the way curl and requests read it:

- `HTTPS_PROXY` / `HTTP_PROXY` (or lower-case): `http://[user:pass@]host:port`.
  https upstreams go through a CONNECT tunnel (TLS stays end to end), http
  upstreams are sent to the proxy in absolute form.
- `NO_PROXY`: comma-separated hosts (`example.com` also matches its
  subdomains, a leading `.` or `*.` is the same), `host:port`, IP addresses,
  CIDR ranges, or `*` for everything.
- `REQUESTS_CA_BUNDLE` / `SSL_CERT_FILE` (first set wins), and a channel's own
  `ca_bundle`: PEM files trusted in addition to the system's CAs.

Everything here is decided once per origin, never per request.
"""

from __future__ import annotations

import asyncio
import base64
import ipaddress
import ssl
from collections.abc import Iterable, Mapping
from typing import NamedTuple, Protocol
from urllib.parse import unquote, urlsplit

from tiergate.providers.exchange import ConnectError, ProxyError

CA_BUNDLE_ENV = ("REQUESTS_CA_BUNDLE", "SSL_CERT_FILE")


class Proxy(NamedTuple):
    host: str
    port: int
    authorization: str | None  # the Proxy-Authorization value, from the URL's user:pass

    @property
    def address(self) -> str:
        """host:port, for logs: never the credentials."""
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


class ChannelTrust(Protocol):
    """What the network needs of a channel config: its URL and its CA bundle."""

    ca_bundle: str | None

    def resolved_base_url(self) -> str: ...


def parse_proxy(url: str) -> Proxy:
    """`http://[user:pass@]host[:port]`; a bare `host:port` means http too."""
    parts = urlsplit(url if "://" in url else f"http://{url}")
    if parts.scheme != "http" or not parts.hostname:
        raise ValueError(f"proxy URL must be http://host:port, got {parts.scheme}://")
    auth = None
    if parts.username is not None:
        user_pass = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
        auth = "Basic " + base64.b64encode(user_pass.encode()).decode("ascii")
    return Proxy(parts.hostname, parts.port or 80, auth)


class NoProxy:
    """The NO_PROXY rules: which upstream hosts are reached directly."""

    def __init__(self, spec: str) -> None:
        self.everything = False
        self.names: list[tuple[str, int | None]] = []
        self.networks: list[ipaddress.IPv4Network | ipaddress.IPv6Network] = []
        for raw in spec.replace(" ", ",").split(","):
            entry = raw.strip().lower()
            if not entry:
                continue
            if entry == "*":
                self.everything = True
                continue
            try:
                self.networks.append(ipaddress.ip_network(entry.strip("[]"), strict=False))
                continue
            except ValueError:
                pass
            name, port = entry, None
            if entry.count(":") == 1 and entry.rsplit(":", 1)[1].isdigit():
                name, port_text = entry.rsplit(":", 1)
                port = int(port_text)
            self.names.append((name.removeprefix("*").lstrip("."), port))

    def bypass(self, host: str, port: int) -> bool:
        if self.everything:
            return True
        host = host.lower().strip("[]")
        try:
            address = ipaddress.ip_address(host)
        except ValueError:
            address = None
        if address is not None and any(address in net for net in self.networks):
            return True
        for name, only_port in self.names:
            if only_port is not None and only_port != port:
                continue
            if host == name or host.endswith("." + name):
                return True
        return False


class UpstreamNetwork:
    """Proxy and TLS trust for each upstream origin."""

    def __init__(
        self,
        *,
        http_proxy: Proxy | None = None,
        https_proxy: Proxy | None = None,
        no_proxy: str = "",
        ca_bundle: str | None = None,
    ) -> None:
        self.http_proxy = http_proxy
        self.https_proxy = https_proxy
        self.no_proxy = NoProxy(no_proxy)
        self.ca_bundle = ca_bundle
        self._channel_ca: dict[tuple[str, int], str] = {}
        self._contexts: dict[str | None, ssl.SSLContext] = {}

    @classmethod
    def from_env(
        cls, env: Mapping[str, str], channels: Iterable[ChannelTrust] = ()
    ) -> UpstreamNetwork:
        def get(name: str) -> str:
            return env.get(name) or env.get(name.lower()) or ""

        http, https = get("HTTP_PROXY"), get("HTTPS_PROXY")
        network = cls(
            http_proxy=parse_proxy(http) if http else None,
            https_proxy=parse_proxy(https) if https else None,
            no_proxy=get("NO_PROXY"),
            ca_bundle=next((env[v] for v in CA_BUNDLE_ENV if env.get(v)), None),
        )
        network.set_channels(channels)
        return network

    def set_channels(self, channels: Iterable[ChannelTrust]) -> None:
        """Each channel's `ca_bundle`, by its origin (applies to new connections)."""
        by_origin: dict[tuple[str, int], str] = {}
        for ch in channels:
            if ch.ca_bundle:
                by_origin.setdefault(_origin(ch.resolved_base_url()), ch.ca_bundle)
        self._channel_ca = by_origin

    def proxy_for(self, scheme: str, host: str, port: int) -> Proxy | None:
        proxy = self.https_proxy if scheme == "https" else self.http_proxy
        if proxy is None or self.no_proxy.bypass(host, port):
            return None
        return proxy

    def ssl_context(self, host: str, port: int) -> ssl.SSLContext:
        """The system's CAs plus the origin's channel bundle, else the environment's."""
        cafile = self._channel_ca.get((host.lower(), port), self.ca_bundle)
        ctx = self._contexts.get(cafile)
        if ctx is None:
            ctx = ssl.create_default_context()
            if cafile:
                ctx.load_verify_locations(cafile=cafile)
            self._contexts[cafile] = ctx
        return ctx


def _origin(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    default = 443 if parts.scheme == "https" else 80
    return (parts.hostname or "").lower(), parts.port or default


class _TunnelHandshake(asyncio.Protocol):
    """Reads the proxy's answer to CONNECT (a head, then nothing until we speak)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.answer: asyncio.Future[bytes] = loop.create_future()
        self._buffer = b""

    def data_received(self, data: bytes) -> None:
        self._buffer += data
        if b"\r\n\r\n" in self._buffer and not self.answer.done():
            self.answer.set_result(self._buffer)
        elif len(self._buffer) > 16384 and not self.answer.done():
            self.answer.set_exception(ConnectError("proxy answer too long"))

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.answer.done():
            self.answer.set_exception(ConnectError("proxy closed the connection"))


async def open_tunnel(
    loop: asyncio.AbstractEventLoop, proxy: Proxy, host: str, port: int
) -> asyncio.Transport:
    """A TCP stream to host:port through the proxy's CONNECT (the caller starts TLS)."""
    transport, handshake = await loop.create_connection(
        lambda: _TunnelHandshake(loop), proxy.host, proxy.port
    )
    authority = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    head = f"CONNECT {authority} HTTP/1.1\r\nhost: {authority}\r\n"
    if proxy.authorization:
        head += f"proxy-authorization: {proxy.authorization}\r\n"
    transport.write(head.encode("latin-1") + b"\r\n")
    try:
        answer = await handshake.answer
    except ConnectError as err:  # it closed, or sent no HTTP answer
        transport.abort()
        raise ProxyError(f"proxy {proxy.address}: {err}", proxy.address) from None
    except BaseException:
        transport.abort()
        raise
    status_line = answer.split(b"\r\n", 1)[0].split()
    if len(status_line) < 2 or status_line[1] != b"200":
        transport.close()
        shown = b" ".join(status_line[1:3]).decode("latin-1", "replace")[:80]
        code = status_line[1] if len(status_line) > 1 else b""
        status = int(code) if code.isdigit() and len(code) == 3 else 0
        raise ProxyError(f"proxy {proxy.address} refused CONNECT: {shown}", proxy.address, status)
    return transport
