"""uvicorn's httptools protocol, handing a request body over in the pieces it was read in.

Why: since uvicorn 0.42 the protocol gathers each read's body bytes into a
`bytearray` (`cycle.body += body`) and hands the app `bytes(cycle.body)`: two
copies of every inbound byte, even when a read delivered exactly one piece, which
is every receive of a long agent body (uvicorn pauses reading once 64 KB are
waiting, and a read is up to 256 KB). The gateway reads a body in the pieces it
arrived in and never joins them (formats/body_decode.py), so these two copies were
most of the per-byte work left on its side of the socket: by callgrind, a 466 KB
turn-200 request served by `tiergate serve` executed 7.21 M instructions with the
stock protocol and 6.26 M with this one, and simulated cache misses fell 13-18 %
(docs/performance.md, "Session 23"; issue #30).

`PieceBody` stands where uvicorn keeps the `bytearray`: it appends, has a length,
and converts to `bytes` when uvicorn's `receive` asks, returning a lone piece
itself and joining several once. Nothing else of the protocol changes. It relies
on two lines of uvicorn's (`on_body`'s append, `receive`'s `bytes(...)`);
tests/test_http_protocol.py checks both against the installed uvicorn, so an
upgrade that moves them fails the suite instead of corrupting bodies.
"""

from __future__ import annotations

from typing import Any

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


class PieceHttpToolsProtocol(HttpToolsProtocol):
    """HttpToolsProtocol whose request body is a PieceBody (see the module docstring)."""

    def on_body(self, body: bytes) -> None:
        cycle = self.cycle
        if (self.parser.should_upgrade() and self._should_upgrade()) or cycle.response_complete:
            return
        current = cycle.body
        if isinstance(current, PieceBody):
            pieces = current
        else:  # a fresh cycle, or uvicorn's receive reset it
            pieces = PieceBody()
            if current:
                pieces += bytes(current)
            cycle.body = pieces  # type: ignore[assignment]
        pieces += body
        if pieces.size > HIGH_WATER_LIMIT:
            self.flow.pause_reading()
        cycle.message_event.set()


def gateway_server_config(app: Any, host: str, port: int) -> uvicorn.Config:
    """How `tiergate serve` runs uvicorn: uvloop, this module's protocol, a 30 s
    graceful shutdown, and tiergate's own logging (no uvicorn log config)."""
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level="warning",
        loop="uvloop",
        http=PieceHttpToolsProtocol,
        timeout_graceful_shutdown=30,
        log_config=None,
    )
