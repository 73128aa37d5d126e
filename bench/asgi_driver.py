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


async def post(app: Any, path: str, headers: list[tuple[bytes, bytes]], body: bytes) -> int:
    """POST `body` to `path` as one message; the reply's status. The client stays
    connected until the app is done, as a waiting client does."""
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
    sent = False
    never = asyncio.Event()
    status = 0

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
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
