"""The floor for any proxy: a TCP relay that moves the bytes and reads none of them.

    .venv/bin/python bench/bare_proxy.py --port 9000 --upstream 127.0.0.1:8001

Why: issue #30 asks that a session's turn 200 add no more than its turn 2,
and that the per-KB slope stay near the cost of moving the bytes. On a
loopback machine, moving 441 KB through one more process costs two socket
copies and the kernel's TCP work, which no gateway can skip. This relay is
that cost and nothing else: each client connection gets its own upstream
connection and every chunk read from one side is written to the other, so an
HTTP/1.1 keep-alive exchange passes through unparsed. `--whole-requests`
holds each request until its body has arrived (store and forward, as any proxy
that routes on the body's content must: the latest message is at its end).
Runs on the same event loop as the gateway (uvloop when installed); measured by
bench/bench_bodies.py beside the gateway.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
from typing import cast


class _Side(asyncio.Protocol):
    """One socket of a relayed pair: what it reads it writes to its peer, and it
    stops reading while the peer's send buffer is full (flow control)."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.peer: _Side | None = None
        self.pending: list[bytes | bytearray] = []  # read before the peer connected

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is no subclass

    def data_received(self, data: bytes) -> None:
        self.forward(data)

    def forward(self, data: bytes | bytearray) -> None:
        peer = self.peer
        if peer is None or peer.transport is None:
            self.pending.append(data)
            return
        peer.transport.write(data)

    def eof_received(self) -> bool | None:
        if self.peer is not None and self.peer.transport is not None:
            self.peer.transport.close()
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        if self.peer is not None and self.peer.transport is not None:
            self.peer.transport.close()

    def pause_writing(self) -> None:  # our send buffer is full: the peer stops reading
        if self.peer is not None and self.peer.transport is not None:
            self.peer.transport.pause_reading()

    def resume_writing(self) -> None:
        if self.peer is not None and self.peer.transport is not None:
            self.peer.transport.resume_reading()

    def attach(self, peer: _Side) -> None:
        """Pair with `peer` and hand it what arrived before the pair was made."""
        self.peer, peer.peer = peer, self
        assert self.transport is not None
        for data in peer.pending:
            self.transport.write(data)
        peer.pending.clear()


class _WholeRequests(_Side):
    """The client's side, store and forward: each request is sent on once its
    whole body has arrived, as a proxy that reads the body to choose where it
    goes must (HTTP/1.1 with Content-Length, what the benches send)."""

    def __init__(self) -> None:
        super().__init__()
        self.buffer = bytearray()
        self.size = 0  #: the current request's head and body, once its head is read

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while True:
            if not self.size:
                end = self.buffer.find(b"\r\n\r\n")
                if end < 0:
                    return
                self.size = end + 4 + _content_length(bytes(self.buffer[:end]))
            if len(self.buffer) < self.size:
                return
            size, self.size = self.size, 0
            if size == len(self.buffer):  # the usual case: hand the buffer over, no copy
                whole, self.buffer = self.buffer, bytearray()
                self.forward(whole)
                return
            self.forward(self.buffer[:size])
            del self.buffer[:size]


def _content_length(head: bytes) -> int:
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return int(value)
    return 0


async def _accepted(client: _Side, host: str, port: int) -> None:
    loop = asyncio.get_running_loop()
    try:
        _, upstream = await loop.create_connection(_Side, host, port)
    except OSError:
        if client.transport is not None:
            client.transport.close()
        return
    upstream.attach(client)


async def serve(port: int, upstream: str, host: str = "127.0.0.1", whole: bool = False) -> None:
    """Relay every connection to `upstream`; `whole`: forward whole requests only."""
    up_host, _, up_port = upstream.rpartition(":")
    loop = asyncio.get_running_loop()
    tasks: set[asyncio.Task[None]] = set()

    def accept() -> _Side:
        side = _WholeRequests() if whole else _Side()
        task = loop.create_task(_accepted(side, up_host, int(up_port)))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
        return side

    server = await loop.create_server(accept, host, port)
    async with server:
        await server.serve_forever()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--host", default="127.0.0.1", help="address to listen on")
    p.add_argument("--port", type=int, required=True, help="port to listen on")
    p.add_argument("--upstream", required=True, help="host:port to relay every connection to")
    p.add_argument(
        "--whole-requests",
        action="store_true",
        help="store and forward: send each request on only once its body has arrived",
    )
    args = p.parse_args(argv)
    with contextlib.suppress(ImportError):
        import uvloop

        uvloop.install()
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(args.port, args.upstream, args.host, args.whole_requests))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
