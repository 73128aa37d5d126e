"""Kept-alive connections per origin for the upstream client (providers/client.py)."""

from __future__ import annotations

import asyncio
import ssl
from collections import deque
from typing import Protocol

from tiergate.providers.exchange import (
    ConnectError,
    Connection,
    ConnectionClosed,
    ConnectTimeout,
    ProxyError,
)
from tiergate.providers.network import Proxy, open_tunnel


class PoolOwner(Protocol):
    """The settings a pool reads from the client that owns it (providers/client.HTTPClient);
    named here so this module does not import the client, which imports it."""

    loop: asyncio.AbstractEventLoop
    read_timeout: float | None
    connect_timeout: float | None
    idle_timeout: float
    limit_per_host: int

    def ssl_context(self, host: str, port: int) -> ssl.SSLContext: ...


class HostPool:
    """Kept-alive connections to one origin, at most `limit` open (LIFO reuse, so
    the spare ones age out after `idle_timeout`)."""

    def __init__(
        self, client: PoolOwner, host: str, port: int, tls: bool, proxy: Proxy | None = None
    ) -> None:
        self.loop = client.loop
        self.read_timeout = client.read_timeout
        self._client = client
        self._host, self._port, self._tls = host, port, tls
        self._proxy = proxy
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
        host, port, tls = self._host, self._port, self._tls
        try:
            async with asyncio.timeout(self._client.connect_timeout):
                if self._proxy is not None and tls:
                    return await self._open_tunnelled(self._proxy)
                if self._proxy is not None:  # plain http: the proxy is the peer
                    host, port = self._proxy.host, self._proxy.port
                _, conn = await self.loop.create_connection(
                    lambda: Connection(self),
                    host,
                    port,
                    ssl=self._client.ssl_context(host, port) if tls else None,
                    server_hostname=host if tls else None,
                )
        except TimeoutError:
            raise ConnectTimeout("connect timed out") from None
        except OSError as err:
            if self._proxy is not None:
                where = self._proxy.address
                message = f"proxy {where} unreachable: {type(err).__name__}: {err}"
                raise ProxyError(message, where) from None
            raise ConnectError(f"{type(err).__name__}: {err}") from None
        return conn

    async def _open_tunnelled(self, proxy: Proxy) -> Connection:
        """TLS to the upstream inside the proxy's CONNECT tunnel: end to end, so the
        proxy sees neither the request nor the key."""
        raw = await open_tunnel(self.loop, proxy, self._host, self._port)
        conn = Connection(self)
        try:
            transport = await self.loop.start_tls(
                raw,
                conn,
                self._client.ssl_context(self._host, self._port),
                server_hostname=self._host,
            )
        except BaseException:
            raw.abort()
            raise
        assert transport is not None
        conn.connection_made(transport)
        return conn

    def _sweep(self) -> None:
        self._sweeper = None
        idle_timeout = self._client.idle_timeout
        expired = self.loop.time() - idle_timeout
        while self._idle and self._idle[0].idle_since <= expired:
            self._idle[0].close()  # forget() removes it from the deque
        if self._idle:
            self._sweeper = self.loop.call_at(self._idle[0].idle_since + idle_timeout, self._sweep)
