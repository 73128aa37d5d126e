"""Scripted raw HTTP/1.1 servers and helpers for the upstream client tests.

The provider simulator cannot produce every edge case (chunked and gzip bodies,
Connection: close, idle closes, stalls); these small asyncio servers write any
bytes a test scripts, over plain TCP or TLS.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any

import uvloop

Runner = Callable[[Coroutine[Any, Any, Any]], Any]
LOOPS: dict[str, Callable[[], asyncio.AbstractEventLoop]] = {
    "asyncio": asyncio.new_event_loop,
    "uvloop": uvloop.new_event_loop,
}
AUTH = {"authorization": "Bearer k1", "content-type": "application/json"}
PAD = "x" * 3000
OPENAI_BODY = {"model": "gpt-5-mini", "messages": [{"role": "user", "content": "hi"}]}


async def until(cond: Callable[[], bool], timeout: float = 3.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "condition not reached"
        await asyncio.sleep(0.01)


# ---- a scripted raw HTTP/1.1 server ------------------------------------------------------


@dataclass
class Req:
    conn: int  # connection number at the server, from 1
    n: int  # request number on that connection, from 1
    headers: dict[str, str]
    body: bytes


Respond = Callable[[Req, asyncio.StreamWriter], Awaitable[bool]]


class RawServer:
    """Reads requests (Content-Length bodies) and lets `respond` write anything;
    `respond` returns False to close the connection afterwards."""

    def __init__(self, respond: Respond, tls: ssl.SSLContext | None = None) -> None:
        self.respond = respond
        self.tls = tls
        self.connections = 0
        self.ended = 0
        self.requests: list[Req] = []

    async def __aenter__(self) -> RawServer:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=self.tls)
        port = self._server.sockets[0].getsockname()[1]
        scheme, host = ("https", "localhost") if self.tls else ("http", "127.0.0.1")
        self.url = f"{scheme}://{host}:{port}/v1/chat/completions"
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._server.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        conn, n = self.connections, 0
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")[1:-2]
                headers = {k.lower(): v.strip() for k, v in (x.split(":", 1) for x in lines)}
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                n += 1
                req = Req(conn, n, headers, body)
                self.requests.append(req)
                if not await self.respond(req, writer):
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            self.ended += 1
            writer.close()


def reply(status: int = 200, body: bytes = b'{"ok": true}', *headers: str) -> bytes:
    extra = "".join(f"{h}\r\n" for h in headers)
    head = f"HTTP/1.1 {status} X\r\ncontent-length: {len(body)}\r\n{extra}\r\n"
    return head.encode() + body


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


CHUNKED_HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n"
)


async def ok(req: Req, w: asyncio.StreamWriter) -> bool:
    w.write(reply())
    return True


async def stall(req: Req, w: asyncio.StreamWriter) -> bool:
    await asyncio.sleep(30)
    return False


async def drain(it: Any) -> list[bytes]:
    return [c async for c in it]


def runner_on(loop: str) -> Runner:
    """Run a scenario to completion on a fresh event loop of kind `loop` (LOOPS);
    the test files' `run` fixture is parametrised over every kind."""

    def runner(coro: Coroutine[Any, Any, Any]) -> Any:
        with asyncio.Runner(loop_factory=LOOPS[loop]) as r:
            return r.run(asyncio.wait_for(coro, 20))

    return runner
