"""A lean pipelined RESP2 client for the state store's hot path.

redis-py spends ~125 us of CPU per call (connection pool checkout, response
callbacks, retry wrappers); this client spends a fraction of that: one
multiplexed connection per store, hiredis to pack commands and parse replies,
and an asyncio.Protocol that resolves callers' futures in reply order.

Failure model, matching RedisStore's: every connection problem (refused,
connect timeout, no reply within `socket_timeout`, connection lost) and every
server-side "cannot serve now" reply (OOM, LOADING, READONLY...) raises
StateUnavailable; any other error reply raises ReplyError. A broken connection
fails every call in flight and is replaced lazily by the next call. Nothing is
ever re-sent once written (a re-sent INCRBYFLOAT would double-count). A
cancelled caller's reply is still read and dropped, so the stream stays in step.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, cast
from urllib.parse import unquote, urlsplit

import hiredis

from tiergate.state.base import StateUnavailable

Arg = bytes | str | int | float

#: Error replies that mean "cannot use Redis right now", not "bad call".
UNAVAILABLE_PREFIXES = (
    "OOM",
    "MISCONF",
    "LOADING",
    "MASTERDOWN",
    "CLUSTERDOWN",
    "BUSY",
    "READONLY",
)

#: A connect deadline noticed this late (seconds) means the loop stalled, not Redis.
STALL_SLACK = 0.1
#: The extra wait such a stall earns, and how many times in one connect.
STALL_GRACE = 0.05
STALL_GRACES = 3
#: Loop turns a dial seen on time still gets to finish its set-up steps.
SETTLE_TURNS = 3

_pack = cast("Callable[[tuple[Arg, ...]], bytes]", hiredis.pack_command)
pack = _pack


class ReplyError(Exception):
    """Redis answered with an error that is the caller's fault (WRONGTYPE, script error...)."""


def _unix_db(query: str) -> int | None:
    """The database of a unix:// URL's query (`db=N`, or none: 0); None when the query
    holds anything else (an option only redis-py reads)."""
    if not query:
        return 0
    name, eq, value = query.partition("=")
    if name != "db" or not eq or not value.isdigit():
        return None
    return int(value)


def check(reply: Any) -> Any:
    """Return `reply`, or raise it as StateUnavailable / ReplyError if it is an error reply."""
    if isinstance(reply, hiredis.ReplyError):
        msg = str(reply)
        if msg.startswith(UNAVAILABLE_PREFIXES):
            raise StateUnavailable(f"redis: {msg}")
        raise ReplyError(msg)
    return reply


@dataclass(frozen=True, slots=True)
class Script:
    """A Lua script and its SHA1, for EVALSHA with an EVAL fallback."""

    source: str
    sha: str

    @classmethod
    def of(cls, source: str) -> Script:
        return cls(source, hashlib.sha1(source.encode()).hexdigest())


class _Connection(asyncio.Protocol):
    """One socket: writes commands, matches replies to waiting futures in order.

    Timeouts use one watchdog timer per connection rather than one per call: it
    fires every `timeout` seconds while calls are pending and breaks the
    connection when no reply arrived for `timeout` seconds (redis-py's
    socket-timeout semantics, without a timer per call).
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, timeout: float, where: str) -> None:
        self.loop = loop
        self.timeout = timeout
        self.where = where
        self.transport: asyncio.Transport | None = None
        self.reader = hiredis.Reader()
        self.pending: deque[tuple[asyncio.Future[Any], int]] = deque()
        self.partial: list[Any] = []  # replies so far of a multi-command call
        self.closed = False
        self.last_progress = 0.0
        self.watchdog: asyncio.TimerHandle | None = None
        self.outbox: list[bytes] = []  # commands written on the next loop turn, together

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast("asyncio.Transport", transport)

    def send(self, payload: bytes, replies: int) -> asyncio.Future[Any]:
        """Write `payload`; the future gets its reply (or a list of `replies` > 1 replies)."""
        fut = self.loop.create_future()
        if self.closed:  # lost while the caller was waiting for the connect
            fut.set_exception(StateUnavailable(f"redis {self.where}: connection lost"))
            return fut
        if not self.pending:
            self.last_progress = self.loop.time()
            if self.watchdog is None:
                self.watchdog = self.loop.call_later(self.timeout, self._check_progress)
        idle = not self.pending
        self.pending.append((fut, replies))
        assert self.transport is not None
        if idle:  # nothing in flight, so nothing to batch with: write it now
            self.transport.write(payload)
            return fut
        if not self.outbox:
            self.loop.call_soon(self.flush)
        self.outbox.append(payload)
        return fut

    def flush(self) -> None:
        """Write every command queued while others were in flight, in one syscall.

        Under load, several requests reach their Redis call while earlier replies
        are outstanding; one write for all of them at the end of the loop turn
        saves a syscall (and a wakeup of Redis) per command. The order of
        `pending` is the order of the bytes.
        """
        out, self.outbox = self.outbox, []
        if self.closed or self.transport is None or not out:
            return  # the calls in flight were failed when the connection broke
        self.transport.write(out[0] if len(out) == 1 else b"".join(out))

    def data_received(self, data: bytes) -> None:
        self.reader.feed(data)
        pending, partial = self.pending, self.partial
        while True:
            try:
                reply = self.reader.gets()
            except hiredis.ProtocolError as err:
                self.fail(f"protocol error: {err}")
                return
            if reply is False:
                break
            if not pending:  # unsolicited data: the stream cannot be trusted
                self.fail("reply without a request")
                return
            fut, n = pending[0]
            if n > 1:
                partial.append(reply)
                if len(partial) < n:
                    continue
                reply, partial = partial, []
                self.partial = partial
            pending.popleft()
            if not fut.done():  # a cancelled caller's reply is dropped here
                fut.set_result(reply)
        self.last_progress = self.loop.time()

    def _check_progress(self) -> None:
        self.watchdog = None
        if not self.pending or self.closed:
            return
        idle = self.loop.time() - self.last_progress
        if idle >= self.timeout:
            self.fail(f"no reply within {self.timeout:g} s")
        else:
            self.watchdog = self.loop.call_later(self.timeout - idle, self._check_progress)

    def fail(self, why: str) -> None:
        """Break the connection: abort the socket and fail every call in flight."""
        if self.transport is not None:
            self.transport.abort()
        self._fail_pending(why)

    def connection_lost(self, exc: Exception | None) -> None:
        self._fail_pending(f"connection lost ({exc or 'closed by server'})")

    def _fail_pending(self, why: str) -> None:
        self.closed = True
        if self.watchdog is not None:
            self.watchdog.cancel()
            self.watchdog = None
        pending, self.pending = self.pending, deque()
        for fut, _ in pending:
            if not fut.done():
                fut.set_exception(StateUnavailable(f"redis {self.where}: {why}"))


class RespClient:
    """Pipelined client on one connection, (re)opened lazily by the first call that needs it."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 6379,
        *,
        username: str | None = None,
        password: str | None = None,
        db: int = 0,
        connect_timeout: float = 0.5,
        socket_timeout: float = 0.5,
        unix_path: str | None = None,
    ) -> None:
        self.host, self.port = host, port
        #: a Unix socket to dial instead of host:port (a Redis on the same host)
        self.unix_path = unix_path
        self.where = unix_path or f"{host}:{port}"
        self._setup: list[tuple[Arg, ...]] = []
        if password is not None:
            self._setup.append(("AUTH", username, password) if username else ("AUTH", password))
        if db:
            self._setup.append(("SELECT", db))
        self.connect_timeout = connect_timeout
        self.socket_timeout = socket_timeout
        self._conn: _Connection | None = None
        self._connecting: asyncio.Task[_Connection] | None = None

    @classmethod
    def from_url(cls, url: str, **kw: Any) -> RespClient | None:
        """A client for `redis://[[user]:password@]host[:port][/db]` or
        `unix://[[user]:password@]/path/to/redis.sock[?db=N]` (redis-py's forms); None
        for anything else (rediss://, other query options), which stays on redis-py.

        Why unix:// here: a Redis on the gateway's own host is often reached by its
        socket file, and sending to it costs less CPU than loopback TCP; before,
        such a URL fell back to redis-py, several times dearer per call."""
        parts = urlsplit(url)
        username = unquote(parts.username) if parts.username else None
        password = unquote(parts.password) if parts.password is not None else None
        if parts.scheme == "unix":
            db = _unix_db(parts.query)
            if db is None or not parts.path:
                return None
            return cls(
                username=username,
                password=password,
                db=db,
                unix_path=unquote(parts.path),
                **kw,
            )
        if parts.scheme != "redis" or parts.query:
            return None
        path = parts.path.strip("/")
        return cls(
            parts.hostname or "127.0.0.1",
            parts.port or 6379,
            username=username,
            password=password,
            db=int(path) if path else 0,
            **kw,
        )

    async def call(self, *args: Arg) -> Any:
        """One command, one reply."""
        return check(await self._send(_pack(args), 1))

    async def pipeline(self, commands: Sequence[tuple[Arg, ...]]) -> list[Any]:
        """Several commands in one write; waits for every reply, then raises the first error."""
        if len(commands) == 1:
            return [await self.call(*commands[0])]
        replies = await self._send(b"".join(_pack(c) for c in commands), len(commands))
        return [check(r) for r in replies]

    async def evalsha(self, script: Script, keys: Sequence[Arg], args: Sequence[Arg]) -> Any:
        """EVALSHA, then EVAL once on NOSCRIPT (a restart or SCRIPT FLUSH emptied the cache;
        NOSCRIPT means nothing ran, so the retry cannot double-apply)."""
        tail = (len(keys), *keys, *args)
        reply = await self._send(_pack(("EVALSHA", script.sha, *tail)), 1)
        if isinstance(reply, hiredis.ReplyError) and str(reply).startswith("NOSCRIPT"):
            reply = await self._send(_pack(("EVAL", script.source, *tail)), 1)
        return check(reply)

    async def send_raw(self, payload: bytes, replies: int = 1) -> Any:
        """Packed commands out, replies back unchecked (error replies are returned,
        not raised): the cluster wire reads MOVED and ASK from them."""
        return await self._send(payload, replies)

    async def _send(self, payload: bytes, replies: int) -> Any:
        conn = self._conn
        if conn is None or conn.closed or conn.loop is not asyncio.get_running_loop():
            conn = await self._connect()
        return await conn.send(payload, replies)

    async def _connect(self) -> _Connection:
        """Share one connect attempt between every caller that needs it; a caller being
        cancelled does not cancel the attempt for the others."""
        loop = asyncio.get_running_loop()
        task = self._connecting
        if task is None or task.get_loop() is not loop:
            task = self._connecting = loop.create_task(self._open(loop))
            task.add_done_callback(self._connect_done)
        return await asyncio.shield(task)

    def _connect_done(self, task: asyncio.Task[_Connection]) -> None:
        if self._connecting is task:
            self._connecting = None
        if not task.cancelled():
            task.exception()  # retrieved: no "never retrieved" warning if every waiter left

    async def _open(self, loop: asyncio.AbstractEventLoop) -> _Connection:
        old, self._conn = self._conn, None
        if old is not None and not old.closed and old.transport is not None:
            with contextlib.suppress(RuntimeError):  # its loop may be closed already
                old.transport.abort()
        try:
            conn = await self._dial(loop)
        except (OSError, TimeoutError) as err:
            raise StateUnavailable(f"redis {self.where}: connect: {err!r}") from err
        if self._setup:
            try:
                payload = b"".join(_pack(c) for c in self._setup)
                replies = await conn.send(payload, len(self._setup))
                for reply in replies if len(self._setup) > 1 else [replies]:
                    if isinstance(reply, hiredis.ReplyError):
                        raise StateUnavailable(f"redis {self.where}: connect: {reply}")
            except BaseException:
                conn.fail("setup failed")
                raise
        self._conn = conn
        return conn

    async def _dial(self, loop: asyncio.AbstractEventLoop) -> _Connection:
        """Open the socket within `connect_timeout` of time the loop was free to notice.

        A plain timeout counts wall time: when the loop itself stalls past the
        deadline (CPU or GIL starvation under load), the kernel's finished connect
        and the expired timer are seen in the same turn and the timer wins, so a
        healthy Redis reads as down and everything that fails open (budgets, rate
        limits) stops holding. Here a deadline seen late by more than STALL_SLACK
        grants a short grace instead, a few times at most, and one seen on time a
        few loop turns (SETTLE_TURNS) for set-up steps queued behind other work.
        """

        def protocol() -> _Connection:
            return _Connection(loop, self.socket_timeout, self.where)

        dial = loop.create_task(
            loop.create_unix_connection(protocol, self.unix_path)
            if self.unix_path is not None
            else loop.create_connection(protocol, self.host, self.port)
        )
        wait = self.connect_timeout
        for _ in range(1 + STALL_GRACES):
            due = loop.time() + wait
            done, _ = await asyncio.wait({dial}, timeout=wait)
            if done:
                return dial.result()[1]
            if loop.time() - due < STALL_SLACK:
                # Seen on time. A busy loop may still owe the dial its last steps
                # (the connected socket's transport and protocol are set up in
                # later turns, each queued behind every request ready to run):
                # a few more turns, not more time, before Redis counts as down.
                for _ in range(SETTLE_TURNS):
                    await asyncio.sleep(0)
                    if dial.done():
                        return dial.result()[1]
                break  # Redis really did not answer
            wait = STALL_GRACE
        dial.cancel()
        try:
            transport, _ = await dial
        except (asyncio.CancelledError, OSError):
            pass
        else:
            transport.abort()  # it landed as we gave up: do not leak the socket
        raise TimeoutError(f"no connection within {self.connect_timeout}s")

    async def close(self) -> None:
        """Close the connection; calls in flight fail with StateUnavailable."""
        conn, self._conn = self._conn, None
        if conn is not None and not conn.closed and conn.transport is not None:
            with contextlib.suppress(RuntimeError):  # its loop may be closed already
                conn.transport.close()
            conn._fail_pending("client closed")
