"""Feeding the gateway's ASGI app directly, in the benchmark's own process.

Why: bench/profile_request.py and bench/bench_session_cpu.py measure the
gateway's own CPU per request without uvicorn or inbound sockets; both start
the app's lifespan and send it POSTs the same way.
"""

from __future__ import annotations

import asyncio
from typing import Any


async def lifespan(app: Any) -> tuple[asyncio.Task[None], asyncio.Queue[Any]]:
    """Start the app's lifespan; put {"type": "lifespan.shutdown"} on the queue and
    await the task to stop it."""
    inbox: asyncio.Queue[Any] = asyncio.Queue()
    outbox: asyncio.Queue[Any] = asyncio.Queue()
    await inbox.put({"type": "lifespan.startup"})
    task = asyncio.ensure_future(app({"type": "lifespan"}, inbox.get, outbox.put))
    msg = await outbox.get()
    if msg["type"] != "lifespan.startup.complete":
        raise RuntimeError(f"startup failed: {msg}")
    return task, inbox


#: uvicorn on uvloop hands a body over one socket read at a time, at most 256 KB
#: each (a 450 KB body arrives as three `http.request` messages), so a long body
#: is sent here in pieces of this size too: the gateway's work on the pieces
#: (a join, or none) is part of what is measured.
PIECE_BYTES = 256 * 1024


async def post(app: Any, path: str, headers: list[tuple[bytes, bytes]], body: bytes) -> int:
    """POST `body` to `path` in PIECE_BYTES messages; the reply's status. The
    client stays connected until the app is done, as a waiting client does."""
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": b"",
        "headers": headers,
        "client": ("127.0.0.1", 5000),
        "server": ("127.0.0.1", 4000),
    }
    pieces = [body[i : i + PIECE_BYTES] for i in range(0, len(body), PIECE_BYTES)] or [b""]
    pieces.reverse()
    never = asyncio.Event()
    status = 0

    async def receive() -> dict[str, Any]:
        if pieces:
            piece = pieces.pop()
            return {"type": "http.request", "body": piece, "more_body": bool(pieces)}
        await never.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]

    await app(scope, receive, send)
    # a real client reads the reply over a socket, during which the event loop
    # runs what the request left scheduled (its deferred commit): let it run
    await asyncio.sleep(0)
    return status
