"""ASGI responses that pace output and fail the way real upstreams fail.

Returning from an ASGI app before the last body message makes uvicorn close
the connection ("ASGI callable returned without completing response"): the
client sees a stream or body cut short with no terminator, which is exactly
the mid-stream disconnect these responses simulate.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping

from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from tiergate.sim.wire import StreamEvent

logger = logging.getLogger(__name__)


class EventStreamResponse(Response):
    """Server-sent events, paced at `tokens_per_second` of output.

    `cut_after`: stop after that many events; then send `tail` and end the
    stream cleanly, or, without a tail, drop the connection.
    `broken`: an undecodable event sent right after the first one.
    """

    def __init__(
        self,
        events: list[StreamEvent],
        *,
        media_type: str,
        tokens_per_second: float = 0.0,
        cut_after: int | None = None,
        tail: list[bytes] | None = None,
        broken: bytes | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self.status_code = 200
        self.media_type = media_type
        self.background = None
        self.init_headers(headers)
        self.events = events
        self.tokens_per_second = tokens_per_second
        self.cut_after = cut_after
        self.tail = tail
        self.broken = broken

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
        loop = asyncio.get_running_loop()
        started = loop.time()
        produced = 0
        try:
            for index, (data, tokens) in enumerate(self.events):
                if self.cut_after is not None and index >= self.cut_after:
                    if self.tail is None:
                        return  # no final body message: the connection is dropped
                    for data in self.tail:
                        await send({"type": "http.response.body", "body": data, "more_body": True})
                    break
                if self.tokens_per_second > 0 and tokens:
                    produced += tokens
                    delay = started + produced / self.tokens_per_second - loop.time()
                    if delay > 0:
                        await asyncio.sleep(delay)
                await send({"type": "http.response.body", "body": data, "more_body": True})
                if index == 0 and self.broken is not None:
                    await send(
                        {"type": "http.response.body", "body": self.broken, "more_body": True}
                    )
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        except OSError:
            logger.debug("client went away mid-stream")


class TruncatedResponse(Response):
    """Announces the full body length, sends half of it, then drops the connection."""

    def __init__(self, body: bytes, *, media_type: str, headers: Mapping[str, str] | None = None):
        self.status_code = 200
        self.media_type = media_type
        self.background = None
        self.body = body
        self.init_headers(headers)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
        half = self.body[: len(self.body) // 2]
        await send({"type": "http.response.body", "body": half, "more_body": True})


async def wait_for_disconnect(receive: Receive, seconds: float) -> bool:
    """Block until the client hangs up (True) or `seconds` pass (False).

    Once the request body has been read, the server's receive() only returns
    when the connection closes, so this costs nothing while it waits.
    """
    try:
        async with asyncio.timeout(seconds):
            while (await receive())["type"] != "http.disconnect":
                pass
            return True
    except TimeoutError:
        return False
