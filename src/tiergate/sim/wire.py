"""What the three wire-format modules share: the contract and small helpers.

Each of openai_wire, anthropic_wire and gemini_wire implements `Wire`
independently of the gateway's own codecs (tiergate.formats), written from the
providers' public API references, so end-to-end tests check the gateway
against a second, separate reading of each format.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import orjson
from starlette.requests import Request

from tiergate.core.tokens import tokenize
from tiergate.sim.prompt import SimCall
from tiergate.sim.responder import Reply

StreamEvent = tuple[bytes, int]
"""One encoded SSE event and the number of output tokens it delivers (for pacing)."""


@dataclass(slots=True)
class SimUsage:
    prompt_tokens: int
    """The whole prompt, cached and written parts included."""
    cache_read: int
    cache_write: int
    cache_write_1h: int
    output_tokens: int
    reasoning_tokens: int


@dataclass(slots=True)
class ReplyContext:
    request_id: str
    created: int


class Wire(Protocol):
    name: str

    def api_key(self, request: Request) -> str | None: ...

    def parse(self, body: Any, request: Request, path_model: str | None) -> SimCall: ...

    def render(self, call: SimCall, reply: Reply, usage: SimUsage, ctx: ReplyContext) -> bytes:
        """The non-streaming response body."""
        ...

    def stream(
        self, call: SimCall, reply: Reply, usage: SimUsage, ctx: ReplyContext, chunk_tokens: int
    ) -> list[StreamEvent]:
        """Every event of the streaming response, terminator included."""
        ...

    def error(self, status: int, message: str, code: str | None = None) -> bytes: ...

    def broken_event(self) -> bytes:
        """An SSE event whose data is not valid JSON (the "malformed" fault)."""
        ...

    def stream_error(self, call: SimCall, status: int, message: str) -> list[bytes]:
        """What ends a stream that fails after it started (the "stream_error" fault)."""
        ...

    def stream_media_type(self, call: SimCall) -> str: ...


def dumps(value: Any) -> bytes:
    return orjson.dumps(value)


def sse_data(value: Any, *, crlf: bool = False) -> bytes:
    return b"data: " + orjson.dumps(value) + (b"\r\n\r\n" if crlf else b"\n\n")


def sse_event(event: str, value: Any) -> bytes:
    return b"event: " + event.encode() + b"\ndata: " + orjson.dumps(value) + b"\n\n"


def token_chunks(text: str, per_chunk: int) -> list[tuple[str, int]]:
    """`text` cut into pieces of `per_chunk` tokens, each with its token count."""
    tokens = tokenize(text)
    per_chunk = max(1, per_chunk)
    return [
        ("".join(tokens[i : i + per_chunk]), len(tokens[i : i + per_chunk]))
        for i in range(0, len(tokens), per_chunk)
    ]


def text_of(value: Any) -> str:
    """Text of a content value that may be a string or a list of typed parts."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "".join(
            p.get("text", "")
            for p in value
            if isinstance(p, dict) and p.get("type") in (None, "text")
        )
    return ""


def canonical_json(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()


def bearer_token(request: Request) -> str | None:
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        return token.strip()
    return None
