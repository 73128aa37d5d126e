"""uvicorn's httptools protocol, without its copies of a long request body.

Why: a coding agent's body is 100 KB-1 MB and arrives every turn, and before
the app saw it the server copied each byte three times: uvloop into a new bytes
object per socket read; and, since uvicorn 0.42, into a `bytearray`
(`cycle.body += body`) and out of it again (`bytes(cycle.body)`) for every
receive, even when one read delivered the whole piece, as it does for every
receive of a long body (uvicorn pauses reading once 64 KB wait; a read is up to
256 KB). The gateway reads a body in the pieces it arrived in and never joins
them (formats/body_decode.py), so these copies were per-byte work it never
needed (issue #30). Served turn-200 requests (466 KB),
by `bench/count_served.py`: 5.47 M instructions and 12.6 M estimated cycles
with the stock protocol, 4.04 M and 9.1 M with this module; a 17 KB request
unchanged. In CPU time the saving (about 1 MB less copied per 466 KB request,
some tens of microseconds) is within this VM's drift (`bench/bench_served_cpu.py`;
docs/performance.md, "Session 23").

Two changes, nothing else of the protocol:
- `PieceBody` stands where uvicorn keeps the `bytearray`: it appends, has a
  length, and converts to `bytes` when uvicorn's `receive` asks, returning a
  lone piece itself and joining several once.
- `BufferedHttpProtocol` receives socket reads into one reused buffer per
  thread (asyncio's BufferedProtocol), which httptools parses in place; it
  copies only what it hands out (the body pieces among them).

It relies on three spots of uvicorn's (`on_body`'s append, `receive`'s
`bytes(...)`, `data_received` passing its data only to the parser);
tests/test_http_protocol.py checks them against the installed uvicorn, so an
upgrade that moves them fails the suite instead of corrupting bodies.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any, cast

import uvicorn
from uvicorn.protocols.http.httptools_impl import HIGH_WATER_LIMIT, HttpToolsProtocol


class PieceBody:
    """Request body bytes read since the app last received, as the pieces read."""

    __slots__ = ("pieces", "size")

    def __init__(self) -> None:
        self.pieces: list[bytes] = []
        self.size = 0

    def __iadd__(self, piece: bytes) -> PieceBody:
        self.pieces.append(piece)
        self.size += len(piece)
        return self

    def __len__(self) -> int:
        return self.size

    def __bytes__(self) -> bytes:
        pieces = self.pieces
        if len(pieces) == 1:
            return pieces[0]  # the usual receive: no copy
        return b"".join(pieces)


#: Bytes one socket read may bring (uvloop's own read buffer is this size too).
READ_BYTES = 256 * 1024
_reads = threading.local()  # one read buffer per thread that runs an event loop


def read_buffer() -> memoryview:
    """This thread's read buffer. Sharing it between connections is safe: a read is
    parsed before the next one starts, and httptools copies what it hands out."""
    view: memoryview | None = getattr(_reads, "view", None)
    if view is None:
        view = _reads.view = memoryview(bytearray(READ_BYTES))
    return view


class PieceHttpToolsProtocol(HttpToolsProtocol):
    """HttpToolsProtocol whose request body is a PieceBody (see the module docstring)."""

    def on_body(self, body: bytes) -> None:
        cycle = self.cycle
        if (self.parser.should_upgrade() and self._should_upgrade()) or cycle.response_complete:
            return
        pieces: object = cycle.body
        if not isinstance(pieces, PieceBody):  # a fresh cycle's, or receive's reset: empty
            pieces = PieceBody()
            cycle.body = pieces  # type: ignore[assignment]
        pieces += body
        if pieces.size > HIGH_WATER_LIMIT:
            self.flow.pause_reading()
        cycle.message_event.set()


class BufferedHttpProtocol(asyncio.BufferedProtocol):
    """PieceHttpToolsProtocol fed from socket reads into a reused buffer.

    uvloop copies every read into a new bytes object for `data_received`, unless
    the protocol is a BufferedProtocol, and it takes any asyncio.Protocol subclass
    for an unbuffered one; so this wraps the HTTP protocol rather than extends it.
    httptools parses the buffer in place (it takes a memoryview) and copies only
    what it hands out, so the buffer can be reused for the next read."""

    __slots__ = ("http",)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.http = PieceHttpToolsProtocol(*args, **kwargs)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.http.connection_made(transport)  # type: ignore[arg-type]

    def connection_lost(self, exc: Exception | None) -> None:
        self.http.connection_lost(exc)

    def eof_received(self) -> None:
        self.http.eof_received()  # None: the transport closes itself, as uvicorn's does

    def pause_writing(self) -> None:
        self.http.pause_writing()

    def resume_writing(self) -> None:
        self.http.resume_writing()

    def get_buffer(self, sizehint: int) -> memoryview:
        return read_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        self.http.data_received(read_buffer()[:nbytes])  # type: ignore[arg-type]


def gateway_server_config(app: Any, host: str, port: int) -> uvicorn.Config:
    """How `tiergate serve` runs uvicorn: uvloop, this module's protocol, a 30 s
    graceful shutdown, and tiergate's own logging (no uvicorn log config)."""
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level="warning",
        loop="uvloop",
        http=cast("type[asyncio.Protocol]", BufferedHttpProtocol),  # a factory, as uvicorn uses it
        timeout_graceful_shutdown=30,
        log_config=None,
    )
