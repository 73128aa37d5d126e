"""One HTTP/1.1 exchange on a kept-alive connection (providers/client.py uses it).

`Connection` is the asyncio Protocol (httptools parses the response) and
`Response` what callers read: status and headers once the head arrived, then
the body, decoded from gzip/deflate. The errors are the client's vocabulary;
providers/http.py maps them onto UpstreamError.
"""

from __future__ import annotations

import asyncio
import zlib
from collections import deque
from typing import Protocol

import httptools

from tiergate.core.body_pieces import UpstreamBody


class HTTPClientError(Exception):
    """Any failure of an exchange; subclasses say which."""


class InvalidRequest(HTTPClientError):
    """The URL or a header cannot be sent."""


class ConnectError(HTTPClientError):
    """No connection could be opened."""


class ProxyError(ConnectError):
    """The HTTP proxy could not be reached or refused the tunnel. `proxy` is its
    host:port (never the credentials of the proxy URL); `status` its answer, if any."""

    def __init__(self, message: str, proxy: str, status: int = 0) -> None:
        super().__init__(message)
        self.proxy = proxy
        self.status = status


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


class ConnectionOwner(Protocol):
    """What a Connection needs of the pool that keeps it (providers/pool.HostPool);
    named here so this module does not import the pool, which imports it."""

    loop: asyncio.AbstractEventLoop
    read_timeout: float | None

    def release(self, conn: Connection) -> None: ...

    def forget(self, conn: Connection) -> None: ...


class Connection(asyncio.Protocol):
    """One kept-alive HTTP/1.1 connection, one exchange at a time.

    The read timeout is one timer per connection that only re-arms itself when
    it fires early; data arrival just stores a timestamp.
    """

    def __init__(self, pool: ConnectionOwner) -> None:
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

    def send(self, head: bytes, body: UpstreamBody) -> Response:
        assert self.transport is not None
        self.uses += 1
        resp = self._resp = Response(self)
        self._decoder = None
        self._got = False
        self._last = self.loop.time()
        if self._timer is None and self.pool.read_timeout is not None:
            self._timer = self.loop.call_at(self._last + self.pool.read_timeout, self._on_timer)
        try:
            # pieces go out in one vectored write: uvloop does not join them
            self.transport.writelines((head, body) if isinstance(body, bytes) else (head, *body))
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
