"""Reading an inbound body and parsing it into a neutral request.

Why a module of its own: the size bound, the JSON decode, the depth bound and
the message memo (formats/message_memo.py) are one step of the data flow (HTTP
in -> normalize), shared by the chat endpoints and the side endpoints
(embeddings, count_tokens, feedback), apart from the pipeline's dispatch.
Every refusal is a GatewayError the caller answers in the client's format.
"""

from __future__ import annotations

from typing import Any

import orjson
from starlette.requests import Request

from tiergate.core.body_pieces import joined
from tiergate.core.model import ChatRequest
from tiergate.core.slot_groups import HISTORY_CACHE_BYTES
from tiergate.formats.body_decode import BodyDecodeMemo
from tiergate.formats.depth import depth_error, too_deep
from tiergate.formats.errors import FormatError
from tiergate.formats.member_memo import CHECKED
from tiergate.formats.message_memo import MessageMemo, Reuse
from tiergate.gateway.errors import GatewayError
from tiergate.gateway.inbound import InboundFormat


async def read_body(
    request: Request,
    limit: int,
    memo: BodyDecodeMemo | None = None,
    field: str = "messages",
) -> tuple[dict[str, Any], int]:
    """The body as a JSON object and its size in bytes; depth is the caller's to check.
    With a `memo` (formats/body_decode.py), the bytes it shares with its
    conversation's previous body are not decoded again (`field`: the array the
    conversation grows); the result is the same."""
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit:
        raise GatewayError(413, f"Request body exceeds {limit} bytes", "request_too_large")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise GatewayError(413, f"Request body exceeds {limit} bytes", "request_too_large")
        if chunk:  # the stream ends with an empty chunk
            chunks.append(chunk)
    try:
        # the memo reads the pieces in place: a long body it reuses is never joined
        body = orjson.loads(joined(chunks)) if memo is None else memo.loads_parts(chunks, field)
    except orjson.JSONDecodeError:
        raise GatewayError(400, "Request body is not valid JSON", "invalid_json") from None
    if not isinstance(body, dict):
        raise GatewayError(400, "Request body must be a JSON object", "invalid_request")
    return body, size


def check_depth(body: dict[str, Any]) -> None:
    """400 for a body nested deeper than re-encoding allows (formats/depth.py)."""
    if (too_deep := depth_error(body)) is not None:
        raise GatewayError(400, too_deep, "invalid_request")


def parse(fmt: InboundFormat, body: dict[str, Any], size: int, memo: MessageMemo) -> ChatRequest:
    """The body as a neutral request, its depth checked first. Formats with a
    memo reuse the conversation's previous parse for the messages it shares, and
    the body-decode memo hands back the same objects for members resent
    unchanged (an agent's tools); those passed this depth check before, so only
    the rest is walked (a walk over the whole history grew with the session, and
    one over the tool schemas cost every request alike)."""
    reuse = None
    raws = body.get(fmt.memo_field)
    if fmt.parse_reusing is not None and fmt.memo_key is not None and type(raws) is list:
        reuse = memo.match(fmt.memo_key, raws)
    if fmt.parse_reusing is None:
        check_depth(body)
        return _parse(fmt, body, size, memo, reuse)
    field = fmt.memo_field
    members = memo.members if size >= memo.members.min_bytes else None  # else all new objects
    fresh: dict[str, Any] = {}
    unchecked: list[Any] = []  # containers to remember once they pass
    for k, v in body.items():
        if k == field:
            continue
        if members is not None and (type(v) is list or type(v) is dict):
            if members.checked(v):
                continue
            unchecked.append(v)
        fresh[k] = v
    if type(raws) is list:
        fresh[field] = raws if reuse is None else raws[reuse.count :]
    elif raws is not None:
        fresh[field] = raws
    if too_deep(fresh):  # the whole body is walked again, to name the field
        check_depth(body)
    if members is not None:
        for v in unchecked:
            members.put(CHECKED, v, True, size)
    return _parse(fmt, body, size, memo, reuse)


def _parse(
    fmt: InboundFormat, body: dict[str, Any], size: int, memo: MessageMemo, reuse: Reuse | None
) -> ChatRequest:
    """The format's parse (reusing the memo's match when it has one); a
    FormatError is the client's 400."""
    try:
        if fmt.parse_reusing is not None:
            return fmt.parse_reusing(body, memo, size, reuse)
        return fmt.parse_request(body)
    except FormatError as err:
        raise GatewayError(400, err.message, "invalid_request") from None


class ChatIntake:
    """The normalize step of a chat request with the memos it carries from each
    conversation's previous request: the body's bytes (formats/body_decode.py)
    and its parse (formats/message_memo.py). One per gateway process."""

    __slots__ = ("body_memo", "message_memo")

    def __init__(self, max_bytes: int = HISTORY_CACHE_BYTES) -> None:
        self.body_memo = BodyDecodeMemo(max_bytes=max_bytes)
        self.message_memo = MessageMemo(max_bytes=max_bytes)

    async def read(
        self, fmt: InboundFormat, request: Request, limit: int
    ) -> tuple[dict[str, Any], int]:
        """The body and its size, decoded reusing the conversation's last body when
        the format memoises its parse."""
        memo = self.body_memo if fmt.parse_reusing is not None else None
        return await read_body(request, limit, memo, fmt.memo_field)

    def parse(self, fmt: InboundFormat, body: dict[str, Any], size: int) -> ChatRequest:
        return parse(fmt, body, size, self.message_memo)
