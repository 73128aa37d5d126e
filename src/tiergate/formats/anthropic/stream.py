"""Messages SSE streams: parse an upstream's events, render a client's."""

from __future__ import annotations

import contextlib
import logging
from typing import Any

import orjson

from tiergate.core.model import (
    FinishReason,
    RawBlockDelta,
    StreamEnd,
    StreamEvent,
    StreamStart,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    ToolCallStart,
    Usage,
)
from tiergate.formats import dumps
from tiergate.formats.anthropic.response import (
    FINISH_IN,
    FINISH_OUT,
    message_id,
    new_message_id,
    parse_usage,
    render_usage,
    tool_use_id,
)
from tiergate.formats.errors import UpstreamStreamError
from tiergate.formats.sse import encode_sse

log = logging.getLogger(__name__)

_NAMED_BLOCKS = frozenset({"text", "thinking", "redacted_thinking", "tool_use"})


class StreamParser:
    """Upstream Anthropic SSE events -> neutral stream events."""

    def __init__(self) -> None:
        self._usage = Usage()
        self._blocks: dict[int, int | None] = {}  # block index -> neutral tool index
        # blocks of other types, relayed whole at their stop: index -> (block, input json)
        self._raw: dict[int, tuple[dict[str, Any], list[str]]] = {}
        self._tools = 0
        self._finish: FinishReason | None = None
        self._started = False
        self._ended = False

    def feed(self, event: str | None, data: str) -> list[StreamEvent]:
        if self._ended:
            return []
        msg = orjson.loads(data)
        kind = msg.get("type") or event
        if kind == "content_block_delta":
            return self._delta(msg)
        if kind == "content_block_start":
            return self._block_start(msg)
        if kind == "message_start":
            m = msg.get("message") or {}
            self._started = True
            self._usage = parse_usage(m.get("usage"))
            return [
                StreamStart(
                    id=str(m.get("id") or new_message_id()),
                    model=str(m.get("model") or ""),
                    input_tokens=self._usage.input_tokens,
                )
            ]
        if kind == "message_delta":
            reason = (msg.get("delta") or {}).get("stop_reason")
            if reason:
                self._finish = FINISH_IN.get(reason, "stop")
            self._usage = parse_usage(msg.get("usage"), self._usage)
            return []
        if kind == "message_stop":
            return self._end()
        if kind == "content_block_stop":
            return self._raw_stop(int(msg.get("index", 0)))
        if kind == "error":
            err = msg.get("error") or {}
            raise UpstreamStreamError(str(err.get("message", "upstream error")), err.get("type"))
        return []  # ping, unknown future events

    def _raw_stop(self, index: int) -> list[StreamEvent]:
        raw = self._raw.pop(index, None)
        if raw is None:
            return []
        block, partial = raw
        if partial:  # a server tool's input, streamed as JSON like a tool_use's
            with contextlib.suppress(orjson.JSONDecodeError):
                block = {**block, "input": orjson.loads("".join(partial))}
        return [RawBlockDelta(block)]

    def _block_start(self, msg: dict[str, Any]) -> list[StreamEvent]:
        block = msg.get("content_block") or {}
        index = int(msg.get("index", 0))
        kind = block.get("type")
        if kind == "tool_use":
            tool = self._tools
            self._tools += 1
            self._blocks[index] = tool
            events: list[StreamEvent] = [
                ToolCallStart(index=tool, id=block.get("id") or "", name=block.get("name") or "")
            ]
            if block.get("input"):
                events.append(ToolCallDelta(index=tool, arguments=dumps(block["input"])))
            return events
        self._blocks[index] = None
        if kind == "text" and block.get("text"):
            return [TextDelta(block["text"])]
        if kind == "thinking" and (block.get("thinking") or block.get("signature")):
            return [ThinkingDelta(block.get("thinking") or "", block.get("signature") or None)]
        if isinstance(kind, str) and kind not in _NAMED_BLOCKS:
            self._raw[index] = (block, [])  # server_tool_use, web_search_tool_result, ...
        # redacted_thinking cannot be carried by the neutral stream events (see docs).
        return []

    def _delta(self, msg: dict[str, Any]) -> list[StreamEvent]:
        delta = msg.get("delta") or {}
        kind = delta.get("type")
        if kind == "text_delta":
            return [TextDelta(delta.get("text") or "")]
        if kind == "input_json_delta":
            raw = self._raw.get(int(msg.get("index", 0)))
            if raw is not None:
                raw[1].append(delta.get("partial_json") or "")
                return []
            tool = self._blocks.get(int(msg.get("index", 0)))
            partial = delta.get("partial_json") or ""
            return (
                [ToolCallDelta(index=tool, arguments=partial)]
                if tool is not None and partial
                else []
            )
        if kind == "thinking_delta":
            return [ThinkingDelta(delta.get("thinking") or "")]
        if kind == "signature_delta":
            return [ThinkingDelta("", delta.get("signature") or None)]
        return []  # citations_delta and future kinds

    def finish(self) -> list[StreamEvent]:
        """End of body without message_stop: complete only if a stop_reason was seen."""
        if self._ended or not self._started or self._finish is None:
            return []
        return self._end()

    def _end(self) -> list[StreamEvent]:
        self._ended = True
        return [StreamEnd(finish_reason=self._finish or "stop", usage=self._usage)]


class StreamRenderer:
    """Neutral stream events -> the full Anthropic SSE event sequence.

    Blocks are opened lazily and closed when the next kind of content starts,
    so indexes are dense and every content_block_start has its stop. A
    thinking block ends at its signature; thinking after that opens a new one.
    """

    def __init__(self, model: str) -> None:
        self.model = model
        self._started = False
        self._done = False
        self._next = 0  # next block index
        self._open: str | None = None  # "text" | "thinking" | "tool"
        self._open_index = 0
        self._signed = False  # the open thinking block already has its signature
        self._tool_blocks: dict[int, int] = {}  # neutral tool index -> block index
        self._text_prefix = b""

    @staticmethod
    def _event(kind: str, payload: dict[str, Any]) -> bytes:
        return encode_sse(orjson.dumps(payload), event=kind)

    def _start(self, message_id: str, input_tokens: int) -> bytes:
        self._started = True
        usage = {
            "input_tokens": input_tokens,
            "output_tokens": 0,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
        }
        message: dict[str, Any] = {
            "id": message_id,
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": usage,
        }
        return self._event("message_start", {"type": "message_start", "message": message})

    def _close(self) -> bytes:
        if self._open is None:
            return b""
        self._open = None
        return self._event(
            "content_block_stop", {"type": "content_block_stop", "index": self._open_index}
        )

    def _open_block(self, kind: str, block: dict[str, Any]) -> bytes:
        out = self._close()
        self._open, self._open_index, self._signed = kind, self._next, False
        self._next += 1
        payload = {"type": "content_block_start", "index": self._open_index, "content_block": block}
        return out + self._event("content_block_start", payload)

    def _block_delta(self, index: int, delta: dict[str, Any]) -> bytes:
        payload = {"type": "content_block_delta", "index": index, "delta": delta}
        return self._event("content_block_delta", payload)

    def render(self, event: StreamEvent) -> bytes:
        if self._done:
            return b""
        out = b""
        if not self._started:
            if isinstance(event, StreamStart):
                return self._start(message_id(event.id), event.input_tokens)
            out = self._start(new_message_id(), 0)
        if isinstance(event, TextDelta):
            if not event.text:
                return out
            if self._open != "text":
                out += self._open_block("text", {"type": "text", "text": ""})
                self._text_prefix = (
                    b'event: content_block_delta\ndata: {"type":"content_block_delta","index":'
                    + str(self._open_index).encode()
                    + b',"delta":{"type":"text_delta","text":'
                )
            # The hot path: one precomputed prefix per block, no dict per token.
            return out + self._text_prefix + orjson.dumps(event.text) + b"}}\n\n"
        if isinstance(event, ToolCallDelta):
            index = self._tool_blocks.get(event.index)
            if index is None or self._open != "tool" or index != self._open_index:
                log.warning("dropping arguments for a tool block that is not open")
                return out
            delta = {"type": "input_json_delta", "partial_json": event.arguments}
            return out + self._block_delta(index, delta)
        if isinstance(event, ToolCallStart):
            tool_use = {
                "type": "tool_use",
                "id": tool_use_id(event.id),
                "name": event.name,
                "input": {},
            }
            out += self._open_block("tool", tool_use)
            self._tool_blocks[event.index] = self._open_index
            return out
        if isinstance(event, ThinkingDelta):
            return out + self._thinking(event)
        if isinstance(event, RawBlockDelta):  # relayed whole: start with it, then stop
            return out + self._open_block("raw", event.block) + self._close()
        if isinstance(event, StreamEnd):
            self._done = True
            stop: dict[str, Any] = {
                "stop_reason": FINISH_OUT.get(event.finish_reason, "end_turn"),
                "stop_sequence": None,
            }
            message_delta = {
                "type": "message_delta",
                "delta": stop,
                "usage": render_usage(event.usage),
            }
            return (
                out
                + self._close()
                + self._event("message_delta", message_delta)
                + self._event("message_stop", {"type": "message_stop"})
            )
        return out

    def _thinking(self, event: ThinkingDelta) -> bytes:
        out = b""
        if self._open != "thinking" or (self._signed and event.text):
            out += self._open_block(
                "thinking", {"type": "thinking", "thinking": "", "signature": ""}
            )
        if event.text:
            out += self._block_delta(
                self._open_index, {"type": "thinking_delta", "thinking": event.text}
            )
        if event.signature:
            self._signed = True
            out += self._block_delta(
                self._open_index, {"type": "signature_delta", "signature": event.signature}
            )
        return out
