"""A lean HTTP/1.1 client for the upstream hot path: asyncio.Protocol + httptools.

aiohttp spent ~250-320 µs of CPU per upstream POST here; this client does the
same job in a fraction of that (docs/performance.md) by doing only what the
gateway needs: POST with pre-encoded bytes, keep-alive pooling per origin,
gzip/deflate decoding, a connect timeout and a between-bytes read timeout.

Layers: `Response` (one exchange's state, what callers read), `Connection`
(the protocol feeding it), `HostPool` (bounded keep-alive pool per origin) and
`HTTPClient` (URL cache, request bytes, the one stale-connection retry).
"""

from __future__ import annotations

import asyncio
import ssl
import zlib
from collections import deque
from collections.abc import Mapping
from typing import NamedTuple
from urllib.parse import urlsplit

import httptools


class HTTPClientError(Exception):
    """Any failure of an exchange; subclasses say which."""


class InvalidRequest(HTTPClientError):
    """The URL or a header cannot be sent."""


class ConnectError(HTTPClientError):
    """No connection could be opened."""


class ConnectionClosed(HTTPClientError):
    """The connection ended before the response did."""


class StaleConnection(ConnectionClosed):
    """A reused keep-alive connection died right after the request, before any response
    byte: the server had closed it while idle, so resending is safe."""


_STALE_WINDOW = 1.0  # seconds; a later loss may mean the server was working on it


class ProtocolError(HTTPClientError):
    """The response was not valid HTTP/1.1 or its body could not be decoded."""


class ClientTimeout(HTTPClientError):
    """A timeout elapsed."""


class ConnectTimeout(ClientTimeout):
    """Connecting (or waiting for a pool slot) took longer than the connect timeout."""


class ReadTimeout(ClientTimeout):
    """No byte arrived for longer than the read timeout."""


def _decoder(header: bytes) -> _Decoder | None:
    enc = header.strip().lower()
    if enc == b"identity":
        return None
    if enc not in (b"gzip", b"x-gzip", b"deflate"):
        raise ProtocolError(f"unsupported content-encoding {enc[:40]!r}")
    return _Decoder(gzip=enc != b"deflate")


class _Decoder:
    """Content-Encoding gzip or deflate (zlib-wrapped or raw, told by the first byte)."""

    def __init__(self, *, gzip: bool) -> None:
        self._gzip = gzip
        self._z: zlib._Decompress | None = None

    def feed(self, data: bytes) -> bytes:
        if self._z is None:
            raw = not self._gzip and (data[0] & 0x0F) != 8
            wbits = (
                16 + zlib.MAX_WBITS if self._gzip else -zlib.MAX_WBITS if raw else zlib.MAX_WBITS
            )
            self._z = zlib.decompressobj(wbits)
        try:
            return self._z.decompress(data)
        except zlib.error as err:
            raise ProtocolError(f"bad compressed body: {err}") from None

    def flush(self) -> bytes:
        return self._z.flush() if self._z is not None else b""


class Response:
    """One exchange: status and headers once the head arrived, then body chunks.

    The connection feeds it and is back in the pool as soon as the message is
    complete (the body is then buffered here), so reading is never on the
    connection's clock. Cancelling a read, or closing before the end, kills
    the connection: it cannot be reused mid-body.
    """

    __slots__ = ("_chunks", "_conn", "_done", "_error", "_head", "_raw", "_waiter", "status")

    def __init__(self, conn: Connection) -> None:
        self.status = 0
        self._raw: dict[bytes, bytes] = {}  # lower-case names; decoded only on demand
        self._conn = conn
        self._chunks: deque[bytes] = deque()
        self._head = False
        self._done = False
        self._error: HTTPClientError | None = None
        self._waiter: asyncio.Future[None] | None = None

    @property
    def headers(self) -> dict[str, str]:
        """Response headers, names lower-case (a repeated header keeps its last value)."""
        return {k.decode("latin-1"): v.decode("latin-1") for k, v in self._raw.items()}

    async def read(self) -> bytes:
        """The whole (decoded) body."""
        while not self._done:
            await self._wait()
        body = b"".join(self._chunks)
        self._chunks.clear()
        return body

    async def next_chunk(self) -> bytes | None:
        """The next decoded body chunk as it arrives; None at the end."""
        while not self._chunks:
            if self._done:
                return None
            await self._wait()
        return self._chunks.popleft()

    def close(self) -> None:
        """Stop reading; a connection with an unread body is closed, never reused."""
        if not self._done:
            self._conn.abort(ConnectionClosed("response closed before its end"))

    async def _wait_head(self) -> None:
        while not self._head:
            await self._wait()

    async def _wait(self) -> None:
        if self._error is not None:
            raise self._error
        self._waiter = waiter = self._conn.loop.create_future()
        try:
            await waiter
        except asyncio.CancelledError:
            self.close()
            raise
        if self._error is not None and not self._done:
            raise self._error

    # fed by the connection
    def _wake(self) -> None:
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _fail(self, err: HTTPClientError) -> None:
        if not self._done and self._error is None:
            self._error = err
            self._wake()

    def _finish(self, decoder: _Decoder | None) -> None:
        if decoder is not None and (tail := decoder.flush()):
            self._chunks.append(tail)
        self._done = True
        self._wake()


class Connection(asyncio.Protocol):
    """One kept-alive HTTP/1.1 connection, one exchange at a time.

    The read timeout is one timer per connection that only re-arms itself when
    it fires early; data arrival just stores a timestamp.
    """

    def __init__(self, pool: HostPool) -> None:
        self.pool = pool
        self.loop = pool.loop
        self.transport: asyncio.Transport | None = None
        self.uses = 0
        self.idle = False
        self.idle_since = 0.0
        self.closed = False
        self._parser = httptools.HttpResponseParser(self)
        self._resp: Response | None = None
        self._decoder: _Decoder | None = None
        self._until_eof = False
        self._got = False
        self._last = 0.0
        self._timer: asyncio.TimerHandle | None = None

    def send(self, head: bytes, body: bytes) -> Response:
        assert self.transport is not None
        self.uses += 1
        resp = self._resp = Response(self)
        self._decoder = None
        self._got = False
        self._last = self.loop.time()
        if self._timer is None and self.pool.read_timeout is not None:
            self._timer = self.loop.call_at(self._last + self.pool.read_timeout, self._on_timer)
        try:
            self.transport.writelines((head, body))
        except Exception:  # noqa: BLE001 - a transport that died under us
            self.abort(StaleConnection("write failed") if self.uses > 1 else None)
        return resp

    def close(self) -> None:
        if not self.closed:
            self._drop()
            if self.transport is not None:
                self.transport.close()

    def abort(self, err: HTTPClientError | None = None) -> None:
        if self._resp is not None:
            self._resp._fail(err or ConnectionClosed("connection closed"))
        if not self.closed:
            self._drop()
            if self.transport is not None:
                self.transport.abort()

    def _drop(self) -> None:
        self.closed = True
        self._resp = None
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self.pool.forget(self)

    def _on_timer(self) -> None:
        self._timer = None
        if self._resp is None or self.closed or self.pool.read_timeout is None:
            return
        due = self._last + self.pool.read_timeout
        if due - self.loop.time() > 0.01:
            self._timer = self.loop.call_at(due, self._on_timer)
            return
        self.abort(ReadTimeout(f"no data for {self.pool.read_timeout:g}s"))

    # asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self._last = self.loop.time()
        resp = self._resp
        if resp is None:
            self.abort()  # bytes nobody asked for: the connection is out of sync
            return
        self._got = True
        try:
            self._parser.feed_data(data)
        except Exception as err:  # noqa: BLE001 - a malformed reply fails this exchange
            cause = err.__context__
            self.abort(cause if isinstance(cause, HTTPClientError) else ProtocolError(str(err)))

    def connection_lost(self, exc: Exception | None) -> None:
        resp = self._resp
        self._drop()
        if resp is None or resp._done:
            return
        if resp._head and self._until_eof:  # body delimited by the close
            try:
                resp._finish(self._decoder)
            except ProtocolError as err:
                resp._fail(err)
        elif not self._got and self.uses > 1 and self.loop.time() - self._last < _STALE_WINDOW:
            resp._fail(StaleConnection("kept-alive connection closed by the server"))
        else:
            resp._fail(ConnectionClosed("server closed the connection"))

    # httptools callbacks
    def on_header(self, name: bytes, value: bytes) -> None:
        if self._resp is not None:
            self._resp._raw[name.lower()] = value

    def on_headers_complete(self) -> None:
        resp = self._resp
        if resp is None:
            raise ProtocolError("unsolicited response")
        status = self._parser.get_status_code()
        if status < 200:  # informational (103 Early Hints): the real head follows
            resp._raw = {}
            return
        resp.status = status
        h = resp._raw
        enc = h.get(b"content-encoding")
        self._decoder = _decoder(enc) if enc else None
        self._until_eof = (
            b"content-length" not in h
            and b"transfer-encoding" not in h
            and status not in (204, 304)
        )
        resp._head = True
        resp._wake()

    def on_body(self, body: bytes) -> None:
        resp = self._resp
        if resp is not None and body:
            data = self._decoder.feed(body) if self._decoder is not None else body
            if data:
                resp._chunks.append(data)
                resp._wake()

    def on_message_complete(self) -> None:
        resp = self._resp
        if resp is None or not resp._head:
            return
        resp._finish(self._decoder)
        self._resp = None
        assert self.transport is not None
        if self._parser.should_keep_alive() and not self.transport.get_write_buffer_size():
            self.pool.release(self)
        else:
            self.close()


class HostPool:
    """Kept-alive connections to one origin, at most `limit` open (LIFO reuse, so
    the spare ones age out after `idle_timeout`)."""

    def __init__(self, client: HTTPClient, host: str, port: int, tls: bool) -> None:
        self.loop = client.loop
        self.read_timeout = client.read_timeout
        self._client = client
        self._host, self._port, self._tls = host, port, tls
        self.conns: set[Connection] = set()
        self._idle: deque[Connection] = deque()
        self._connecting = 0
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._sweeper: asyncio.TimerHandle | None = None
        self.closed = False

    async def acquire(self, *, fresh: bool = False) -> Connection:
        """An idle connection (unless `fresh`), else a new one; waits while at the limit."""
        if not fresh and (conn := self._pop_idle()) is not None:
            return conn
        if not self._waiters and self._room():
            return await self._connect()
        try:
            async with asyncio.timeout(self._client.connect_timeout):
                while True:
                    await self._wait_slot()
                    if not fresh and (conn := self._pop_idle()) is not None:
                        return conn
                    if self._room():
                        return await self._connect()
        except TimeoutError:
            raise ConnectTimeout("no free connection in time") from None

    def release(self, conn: Connection) -> None:
        if self.closed:
            conn.close()
            return
        conn.idle, conn.idle_since = True, self.loop.time()
        self._idle.append(conn)
        if self._sweeper is None:
            self._sweeper = self.loop.call_at(
                conn.idle_since + self._client.idle_timeout, self._sweep
            )
        self._wake_one()

    def forget(self, conn: Connection) -> None:
        if conn.idle:
            conn.idle = False
            self._idle.remove(conn)
        if conn in self.conns:
            self.conns.discard(conn)
            self._wake_one()

    def close(self) -> None:
        self.closed = True
        if self._sweeper is not None:
            self._sweeper.cancel()
            self._sweeper = None
        for conn in list(self.conns):
            conn.close() if conn.idle else conn.abort(ConnectionClosed("client closed"))

    def _room(self) -> bool:
        return len(self.conns) + self._connecting < self._client.limit_per_host

    def _pop_idle(self) -> Connection | None:
        while self._idle:
            conn = self._idle.pop()
            conn.idle = False
            if conn.transport is not None and not conn.transport.is_closing():
                return conn
            conn.close()
        return None

    async def _wait_slot(self) -> None:
        waiter = self.loop.create_future()
        self._waiters.append(waiter)
        try:
            await waiter
        except BaseException:
            if waiter.done() and not waiter.cancelled():
                self._wake_one()  # pass on a wake-up this waiter can no longer use
            else:
                self._waiters.remove(waiter)
            raise

    def _wake_one(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    async def _connect(self) -> Connection:
        if self.closed:
            raise ConnectError("client closed")
        self._connecting += 1
        try:
            conn = await self._open()
        except BaseException:
            self._wake_one()  # the slot this attempt held is free again
            raise
        finally:
            self._connecting -= 1
        if conn.closed or self.closed:  # lost before we got here
            conn.close()
            self._wake_one()
            raise ConnectionClosed("connection closed while opening")
        self.conns.add(conn)
        return conn

    async def _open(self) -> Connection:
        try:
            async with asyncio.timeout(self._client.connect_timeout):
                _, conn = await self.loop.create_connection(
                    lambda: Connection(self),
                    self._host,
                    self._port,
                    ssl=self._client.ssl_context() if self._tls else None,
                    server_hostname=self._host if self._tls else None,
                )
        except TimeoutError:
            raise ConnectTimeout("connect timed out") from None
        except OSError as err:
            raise ConnectError(f"{type(err).__name__}: {err}") from None
        return conn

    def _sweep(self) -> None:
        self._sweeper = None
        idle_timeout = self._client.idle_timeout
        expired = self.loop.time() - idle_timeout
        while self._idle and self._idle[0].idle_since <= expired:
            self._idle[0].close()  # forget() removes it from the deque
        if self._idle:
            self._sweeper = self.loop.call_at(self._idle[0].idle_since + idle_timeout, self._sweep)


class _Target(NamedTuple):
    origin: tuple[str, str, int]
    prefix: str  # request line, host and fixed headers


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
    ) -> None:
        self.loop = asyncio.get_running_loop()
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        self.limit_per_host = limit_per_host
        self.idle_timeout = idle_timeout
        self._pools: dict[tuple[str, str, int], HostPool] = {}
        self._targets: dict[str, _Target] = {}
        self._heads: dict[tuple[object, ...], bytes] = {}
        self._ssl = ssl_context  # default: the system's CAs, made on first https use

    def ssl_context(self) -> ssl.SSLContext:
        if self._ssl is None:
            self._ssl = ssl.create_default_context()
        return self._ssl

    async def post(self, url: str, body: bytes, headers: Mapping[str, str]) -> Response:
        """Send a POST and return once the response head arrived (body not yet read).

        A reused connection the server had closed is retried once on a new one;
        nothing else is retried here."""
        target = self._target(url)
        key = (target.prefix, *headers.items())
        block = self._heads.get(key)
        if block is None:
            if len(self._heads) > 1024:
                self._heads.clear()
            block = self._heads[key] = _head(target.prefix, headers)
        head = b"%scontent-length: %d\r\n\r\n" % (block, len(body))
        pool = self._pools.get(target.origin)
        if pool is None:
            scheme, host, port = target.origin
            pool = self._pools[target.origin] = HostPool(self, host, port, scheme == "https")
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
            target = self._targets[url] = _parse(url)
        return target


def _parse(url: str) -> _Target:
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
    prefix = f"POST {path} HTTP/1.1\r\nhost: {host_header}\r\nuser-agent: tiergate\r\n"
    return _Target((scheme, host, port or default), prefix)


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
