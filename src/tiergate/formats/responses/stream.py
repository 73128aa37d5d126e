"""Neutral stream events as the Responses API's SSE event sequence.

    response.created, response.in_progress
    per output item: response.output_item.added, its deltas, its .done events,
                     response.output_item.done (with the whole item)
    response.completed | response.incomplete | response.failed (with usage)

Every event is `event: <type>` plus a JSON `data` carrying the same `type` and
a `sequence_number` counting from 0. Codex builds its history from
`response.output_item.done` items and ends its turn on `response.completed`,
so every item is closed before the terminal event.

Text and reasoning items close when anything else starts. Tool-call items
stay open until the end (an upstream may interleave two calls' arguments).
Custom and shell calls are function calls upstream: their `input`/`action` is
known only once the JSON arguments are complete, so it is sent at the end.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from tiergate.core.model import (
    ChatRequest,
    StreamEnd,
    StreamEvent,
    TextDelta,
    ThinkingDelta,
    ToolCall,
    ToolCallDelta,
    ToolCallStart,
    Usage,
)
from tiergate.formats.responses.items import (
    ITEM_PREFIX,
    envelope,
    final_status,
    message_item,
    new_id,
    now,
    output_text,
    reasoning_item,
)
from tiergate.formats.responses.tools import FUNCTION, ToolRoute, call_item
from tiergate.formats.sse import encode_sse

_TERMINAL = {
    "completed": "response.completed",
    "incomplete": "response.incomplete",
    "failed": "response.failed",
}


@dataclass(slots=True)
class _Open:
    """An output item being streamed: text, reasoning or a tool call."""

    kind: str  # "message", "reasoning" or the ToolKind of `route`
    item_id: str
    index: int
    chunks: list[str] = field(default_factory=list)
    signature: str | None = None
    call_id: str = ""
    name: str = ""
    route: ToolRoute = FUNCTION
    delta_head: bytes = b""  # a delta event up to its sequence number (StreamRenderer._delta)
    delta_mid: bytes = b""  # from after the sequence number up to the delta's JSON string


class StreamRenderer:
    def __init__(self, req: ChatRequest) -> None:
        self.req = req
        self.routes: dict[str, ToolRoute] = req.extra.get("tool_routes", {})
        self.response_id = new_id("resp")
        self.created_at = now()
        self._seq = 0
        self._started = False
        self._done = False
        self._output: list[dict[str, Any] | None] = []
        self._current: _Open | None = None  # the open text or reasoning item
        self._tools: dict[int, _Open] = {}  # neutral tool index -> its open item

    # ---- framing ---------------------------------------------------------------

    def _event(self, kind: str, payload: dict[str, Any]) -> bytes:
        data = {"type": kind, "sequence_number": self._seq, **payload}
        self._seq += 1
        return encode_sse(orjson.dumps(data), event=kind)

    def _envelope(self, status: str, usage: Usage | None, **kw: Any) -> dict[str, Any]:
        output = [item for item in self._output if item is not None]
        return envelope(self.response_id, self.created_at, self.req, status, output, usage, **kw)

    def _start(self) -> bytes:
        self._started = True
        skeleton = self._envelope("in_progress", None)
        return self._event("response.created", {"response": skeleton}) + self._event(
            "response.in_progress", {"response": skeleton}
        )

    # ---- events ----------------------------------------------------------------

    def render(self, event: StreamEvent) -> bytes:
        if self._done:
            return b""
        out = b"" if self._started else self._start()
        if isinstance(event, TextDelta):
            if event.text:
                out += self._text(event.text)
        elif isinstance(event, ToolCallDelta):
            out += self._tool_delta(event)
        elif isinstance(event, ThinkingDelta):
            out += self._thinking(event)
        elif isinstance(event, ToolCallStart):
            out += self._close_current() + self._tool_start(event)
        elif isinstance(event, StreamEnd):
            out += self._end(event)
        return out  # StreamStart: the created/in_progress pair is all it says

    def fail(self, status: int, message: str) -> bytes:
        """An error after the stream opened: `response.failed`, the end of the stream."""
        if self._done:
            return b""
        out = b"" if self._started else self._start()
        self._done = True
        code = "rate_limit_exceeded" if status == 429 else "server_error"
        failed = self._envelope("failed", None, error={"code": code, "message": message})
        return out + self._event("response.failed", {"response": failed})

    def _open(self, kind: str, prefix: str) -> _Open:
        item = _Open(kind, new_id(prefix), len(self._output))
        self._output.append(None)
        return item

    def _text(self, text: str) -> bytes:
        out = b""
        cur = self._current
        if cur is None or cur.kind != "message":
            out += self._close_current()
            cur = self._current = self._open("message", "msg")
            out += self._event(
                "response.output_item.added",
                {"output_index": cur.index, "item": message_item(cur.item_id, "", "in_progress")},
            )
            out += self._event(
                "response.content_part.added",
                {**self._where(cur), "part": output_text("")},
            )
        cur.chunks.append(text)
        return out + self._delta(cur, "response.output_text.delta", text, b',"logprobs":[]}')

    def _thinking(self, event: ThinkingDelta) -> bytes:
        out = b""
        cur = self._current
        if cur is None or cur.kind != "reasoning":
            out += self._close_current()
            cur = self._current = self._open("reasoning", "rs")
            added = {"type": "reasoning", "id": cur.item_id, "summary": []}
            out += self._event(
                "response.output_item.added", {"output_index": cur.index, "item": added}
            )
        if event.signature:
            cur.signature = event.signature
        if event.text:
            cur.chunks.append(event.text)
            out += self._event(
                "response.reasoning_text.delta", {**self._where(cur), "delta": event.text}
            )
        return out

    def _tool_start(self, event: ToolCallStart) -> bytes:
        route = self.routes.get(event.name, FUNCTION)
        item = self._open(route.kind, ITEM_PREFIX[route.kind])
        item.call_id, item.name, item.route = event.id, event.name, route
        self._tools[event.index] = item
        added = call_item(ToolCall(event.id, event.name, ""), route, item.item_id, "in_progress")
        if route.kind == "custom":
            added["input"] = ""
        return self._event(
            "response.output_item.added", {"output_index": item.index, "item": added}
        )

    def _tool_delta(self, event: ToolCallDelta) -> bytes:
        item = self._tools.get(event.index)
        if item is None or not event.arguments:
            return b""
        item.chunks.append(event.arguments)
        if item.kind != "function":
            return b""  # sent whole at the end (module doc)
        kind = "response.function_call_arguments.delta"
        return self._delta(item, kind, event.arguments, b"}", content_index=False)

    def _delta(
        self, item: _Open, kind: str, text: str, tail: bytes, *, content_index: bool = True
    ) -> bytes:
        """A delta event, the per-token hot path: the item's fixed bytes around the
        sequence number and the escaped text, with no dict built per token. The
        bytes are those `_event` would write (JSON strings never hold a raw newline)."""
        if not item.delta_head:
            item.delta_head = f'event: {kind}\ndata: {{"type":"{kind}","sequence_number":'.encode()
            where = f',"item_id":"{item.item_id}","output_index":{item.index}'
            if content_index:
                where += ',"content_index":0'
            item.delta_mid = (where + ',"delta":').encode()
        seq = self._seq
        self._seq += 1
        escaped = orjson.dumps(text)
        return item.delta_head + str(seq).encode() + item.delta_mid + escaped + tail + b"\n\n"

    # ---- closing items -------------------------------------------------------

    @staticmethod
    def _where(item: _Open) -> dict[str, Any]:
        return {"item_id": item.item_id, "output_index": item.index, "content_index": 0}

    def _finish(self, item: _Open, whole: dict[str, Any]) -> bytes:
        self._output[item.index] = whole
        return self._event("response.output_item.done", {"output_index": item.index, "item": whole})

    def _close_current(self) -> bytes:
        cur, self._current = self._current, None
        if cur is None:
            return b""
        text = "".join(cur.chunks)
        if cur.kind == "reasoning":
            out = b""
            if text:
                done = {**self._where(cur), "text": text}
                out = self._event("response.reasoning_text.done", done)
            return out + self._finish(cur, reasoning_item(cur.item_id, text, cur.signature))
        where = self._where(cur)
        return (
            self._event("response.output_text.done", {**where, "text": text, "logprobs": []})
            + self._event("response.content_part.done", {**where, "part": output_text(text)})
            + self._finish(cur, message_item(cur.item_id, text, "completed"))
        )

    def _close_tool(self, item: _Open) -> bytes:
        call = ToolCall(item.call_id, item.name, "".join(item.chunks))
        kind = item.route.kind
        whole = call_item(call, item.route, item.item_id, "completed")
        where = {"item_id": item.item_id, "output_index": item.index}
        out = b""
        if kind == "function":
            out = self._event(
                "response.function_call_arguments.done",
                {**where, "name": call.name, "arguments": call.arguments},
            )
        elif kind == "custom":
            text = whole["input"]
            out = self._event(
                "response.custom_tool_call_input.delta", {**where, "delta": text}
            ) + self._event("response.custom_tool_call_input.done", {**where, "input": text})
        return out + self._finish(item, whole)

    def _end(self, event: StreamEnd) -> bytes:
        self._done = True
        out = self._close_current()
        for _, item in sorted(self._tools.items()):
            out += self._close_tool(item)
        status, incomplete, error = final_status(event.finish_reason)
        final = self._envelope(status, event.usage, incomplete=incomplete, error=error)
        return out + self._event(_TERMINAL[status], {"response": final})
