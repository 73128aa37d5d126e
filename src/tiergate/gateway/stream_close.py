"""A streamed reply whose clean-up runs however the response ends.

Starlette never starts the body generator when the client is gone before the
first byte is sent, so the generator's own `finally` (which bills the request
and settles its budget hold) would never run. `ClosingStream` closes the
generator after the response, started or not (a started one runs its
`finally` there if it has not yet), then calls `on_close`, which must be
synchronous and idempotent (pipeline: release the budget hold unless it was
already billed).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send


class ClosingStream(StreamingResponse):
    def __init__(
        self, content: AsyncIterator[bytes], on_close: Callable[[], None], **kwargs: Any
    ) -> None:
        super().__init__(content, **kwargs)
        self._content = content
        self._on_close = on_close

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            try:
                aclose = getattr(self._content, "aclose", None)
                if aclose is not None:
                    await aclose()
            finally:
                self._on_close()
