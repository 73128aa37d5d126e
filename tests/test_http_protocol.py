"""The gateway's uvicorn protocol: reads into a reused buffer, bodies in the pieces read.

Real uvicorn servers on loopback, fed by raw sockets so that a body can arrive in
as many reads as a test wants (tiergate/http_protocol.py).
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import random
import re
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle

from servers import ServerThread, free_port
from tiergate.http_protocol import BufferedHttpProtocol, PieceBody, gateway_server_config


def test_uvicorn_still_reads_and_gathers_the_body_where_the_protocol_expects() -> None:
    """The three spots of uvicorn's that tiergate/http_protocol.py relies on. If an
    upgrade moves them, update that module rather than this test."""
    on_body = inspect.getsource(HttpToolsProtocol.on_body)
    assert "self.cycle.body += body" in on_body
    assert "self.flow.pause_reading()" in on_body
    receive = inspect.getsource(RequestResponseCycle.receive)
    assert '"body": bytes(self.body)' in receive
    assert "self.body = bytearray()" in receive
    # BufferedHttpProtocol hands data_received a view of a buffer the next read
    # reuses: safe only while the data goes to the parser alone, which copies.
    received = inspect.getsource(HttpToolsProtocol.data_received).splitlines()
    uses = [line.strip() for line in received if re.search(r"\bdata\b", line)]
    assert uses == ["def data_received(self, data: bytes) -> None:", "self.parser.feed_data(data)"]


def test_a_lone_piece_is_handed_over_without_a_copy() -> None:
    piece = b"x" * 300_000
    body = PieceBody()
    assert not body
    body += piece
    assert len(body) == 300_000 and bytes(body) is piece


def test_several_pieces_are_joined_once_in_order() -> None:
    body = PieceBody()
    for chunk in (b"ab", b"", b"cde", b"f"):
        body += chunk
    assert len(body) == 6 and bytes(body) == b"abcdef"


def test_tiergate_serve_uses_the_protocol() -> None:
    config = gateway_server_config(object(), "127.0.0.1", 4000)
    assert config.http is BufferedHttpProtocol
    assert config.loop == "uvloop"


class EchoApp:
    """Answers each POST with the digest of the body it received, and what the
    ASGI messages carrying it were."""

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        digest, sizes, kinds = hashlib.sha256(), [], set()
        if scope["path"] == "/late":  # let several reads pile up before the first receive
            await asyncio.sleep(0.15)
        while True:
            message = await receive()
            assert message["type"] == "http.request"
            chunk = message["body"]
            kinds.add(type(chunk).__name__)
            digest.update(chunk)
            sizes.append(len(chunk))
            if not message.get("more_body"):
                break
        payload = orjson.dumps({"sha": digest.hexdigest(), "sizes": sizes, "kinds": sorted(kinds)})
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", b"%d" % len(payload)),
                ],
            }
        )
        await send({"type": "http.response.body", "body": payload})


class CountingProtocol(BufferedHttpProtocol):
    """The gateway's protocol, counting the socket reads it takes in its buffer."""

    reads = 0

    def buffer_updated(self, nbytes: int) -> None:
        type(self).reads += 1
        super().buffer_updated(nbytes)


class PieceServer:
    """EchoApp on uvicorn with the gateway's protocol and event loop, in a thread."""

    def __init__(self, protocol: type[BufferedHttpProtocol] | None = None) -> None:
        self.port = free_port()
        config = gateway_server_config(EchoApp(), "127.0.0.1", self.port)
        config.log_level = "warning"
        if protocol is not None:
            config.http = protocol  # type: ignore[assignment]
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        import uvloop

        loop = uvloop.new_event_loop()
        asyncio.set_event_loop(loop)
        loop.run_until_complete(self.server.serve())

    def __enter__(self) -> PieceServer:
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            assert time.monotonic() < deadline and self.thread.is_alive(), "no server"
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


@pytest.fixture(scope="module")
def echo() -> Iterator[PieceServer]:
    with PieceServer() as server:
        yield server


def _read_response(sock: socket.socket) -> dict[str, Any]:
    data = b""
    while b"\r\n\r\n" not in data:
        data += sock.recv(65536)
    head, _, rest = data.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":", 1)[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    while len(rest) < length:
        rest += sock.recv(65536)
    assert head.startswith(b"HTTP/1.1 200"), head
    result: dict[str, Any] = orjson.loads(rest[:length])
    return result


def _post(
    port: int, writes: list[bytes], chunked: bool = False, path: bytes = b"/echo"
) -> dict[str, Any]:
    """POST the concatenation of `writes`, each sent by its own socket write with
    a pause after it, so the server reads the body in at least that many pieces."""
    size = sum(map(len, writes))
    framing = b"transfer-encoding: chunked" if chunked else b"content-length: %d" % size
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.sendall(b"POST %s HTTP/1.1\r\nhost: t\r\n%s\r\n\r\n" % (path, framing))
        for piece in writes:
            sock.sendall(b"%x\r\n%s\r\n" % (len(piece), piece) if chunked else piece)
            time.sleep(0.002)
        if chunked:
            sock.sendall(b"0\r\n\r\n")
        return _read_response(sock)


def _split(body: bytes, cuts: int, rng: random.Random) -> list[bytes]:
    points = sorted(rng.sample(range(1, len(body)), cuts)) if cuts else []
    return [body[a:b] for a, b in zip([0, *points], [*points, len(body)], strict=True) if b > a]


@pytest.mark.parametrize(
    ("size", "cuts", "chunked"),
    [
        (0, 0, False),
        (10, 0, False),
        (20_000, 0, False),
        (300_000, 0, False),
        (1_200_000, 0, False),
        (466_000, 40, False),
        (100_000, 15, True),
        (2_000, 30, True),
    ],
)
def test_the_app_receives_every_byte_in_order_as_bytes(
    echo: PieceServer, size: int, cuts: int, chunked: bool
) -> None:
    rng = random.Random(size * 31 + cuts)
    body = rng.randbytes(size)
    writes = _split(body, cuts, rng) if size else []
    got = _post(echo.port, writes, chunked=chunked)
    assert got["sha"] == hashlib.sha256(body).hexdigest()
    assert sum(got["sizes"]) == size
    assert got["kinds"] == ["bytes"]  # never a PieceBody, never a bytearray


def test_reads_that_pile_up_before_a_receive_arrive_joined_in_order(echo: PieceServer) -> None:
    """The app is late to its first receive: uvicorn reads on (up to its 64 KB
    pause), so one receive hands over several pieces, joined."""
    rng = random.Random(7)
    writes = [rng.randbytes(rng.randint(500, 3000)) for _ in range(30)]
    body = b"".join(writes)
    got = _post(echo.port, writes, path=b"/late")
    assert got["sha"] == hashlib.sha256(body).hexdigest()
    assert len(got["sizes"]) < len(writes)  # some receive carried several reads


def test_socket_reads_land_in_the_reused_buffer() -> None:
    """uvloop takes the buffered path (it would not for an asyncio.Protocol subclass)."""
    CountingProtocol.reads = 0
    with PieceServer(CountingProtocol) as server:
        body = random.Random(3).randbytes(600_000)
        got = _post(server.port, [body[:250_000], body[250_000:]])
    assert got["sha"] == hashlib.sha256(body).hexdigest()
    assert CountingProtocol.reads >= 3  # the head and at least two reads of the body


def test_connections_reading_at_once_keep_their_own_bytes(echo: PieceServer) -> None:
    """Every connection of a thread reads into one buffer: bodies sent at the same
    time, in many small writes each, still arrive whole and unmixed."""
    rng = random.Random(11)
    bodies = [rng.randbytes(400_000) for _ in range(4)]
    results: list[dict[str, Any]] = [{} for _ in bodies]

    def send(i: int) -> None:
        results[i] = _post(echo.port, _split(bodies[i], 60, random.Random(i)))

    threads = [threading.Thread(target=send, args=(i,)) for i in range(len(bodies))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    for body, got in zip(bodies, results, strict=True):
        assert got["sha"] == hashlib.sha256(body).hexdigest()


def test_two_requests_on_one_connection_each_get_their_own_body(echo: PieceServer) -> None:
    first, second = b"a" * 70_000, b"b" * 5
    with socket.create_connection(("127.0.0.1", echo.port)) as sock:
        for body in (first, second):
            sock.sendall(b"POST / HTTP/1.1\r\nhost: t\r\ncontent-length: %d\r\n\r\n" % len(body))
            sock.sendall(body)
            got = _read_response(sock)
            assert got["sha"] == hashlib.sha256(body).hexdigest()


def test_test_servers_use_the_protocol_too() -> None:
    """tests/servers.py's ServerThread runs every served test's gateway, simulator and
    SDK client over this protocol."""
    with ServerThread(EchoApp()) as server:
        body = b"z" * 200_000
        got = _post(server.port, [body[:1000], body[1000:]])
        assert got["sha"] == hashlib.sha256(body).hexdigest()
        assert server.server.config.http is BufferedHttpProtocol
