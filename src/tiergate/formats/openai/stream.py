"""chat.completion.chunk streams: parse an upstream's, render a client's."""

from __future__ import annotations

import time
from typing import Any

import orjson

from tiergate.core.model import (
    FinishReason,
    StreamEnd,
    StreamEvent,
    StreamStart,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    ToolCallStart,
    Usage,
)
from tiergate.formats.errors import UpstreamStreamError
from tiergate.formats.openai.response import (
    FINISH_IN,
    FINISH_OUT,
    new_completion_id,
    parse_usage,
    render_usage,
)


class StreamParser:
    """Upstream `data:` payloads -> neutral stream events.

    Tool calls are keyed by the upstream's `index` (OpenAI sends id and name
    once, then argument fragments); neutral indexes count from 0 in order of
    appearance. StreamEnd waits for [DONE] because the usage chunk comes
    after the finish_reason chunk.
    """

    def __init__(self) -> None:
        self._started = False
        self._ended = False
        self._finish: FinishReason | None = None
        self._usage = Usage()
        self._tools: dict[Any, int] = {}  # upstream index (or id) -> neutral index
        self._last_key: Any = None
        self._id = ""

    def feed(self, data: str) -> list[StreamEvent]:
        if self._ended:
            return []
        if data.strip() == "[DONE]":
            return self._end()
        chunk = orjson.loads(data)
        if not isinstance(chunk, dict):
            raise ValueError("stream chunk is not an object")
        if isinstance(chunk.get("error"), dict):
            err = chunk["error"]
            raise UpstreamStreamError(str(err.get("message", "upstream error")), err.get("type"))
        events: list[StreamEvent] = []
        if not self._started:
            self._started = True
            self._id = str(chunk.get("id") or new_completion_id())
            events.append(StreamStart(id=self._id, model=str(chunk.get("model") or "")))
        usage = chunk.get("usage")
        if usage:
            self._usage = parse_usage(usage)
        for choice in chunk.get("choices") or ():
            if choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            reasoning = delta.get("reasoning_content") or delta.get("reasoning")
            if reasoning and isinstance(reasoning, str):
                events.append(ThinkingDelta(reasoning))
            text = delta.get("content")
            if text:
                events.append(TextDelta(text))
            for tc in delta.get("tool_calls") or ():
                self._tool_delta(tc, events)
            reason = choice.get("finish_reason")
            if reason:
                self._finish = FINISH_IN.get(reason, "stop")
        return events

    def _tool_delta(self, tc: dict[str, Any], events: list[StreamEvent]) -> None:
        fn = tc.get("function") or {}
        call_id = tc.get("id")
        key = tc.get("index")
        if key is None:  # servers that omit index send calls whole: a new id is a new call
            key = call_id if call_id and call_id not in self._tools else self._last_key
        index = self._tools.get(key) if key is not None else None
        if index is None:
            index = len(self._tools)
            key = key if key is not None else f"#{index}"
            self._tools[key] = index
            events.append(
                ToolCallStart(
                    index=index,
                    id=call_id or f"call_{index}_{self._id}",
                    name=fn.get("name") or "",
                )
            )
        self._last_key = key
        args = fn.get("arguments")
        if args:
            events.append(ToolCallDelta(index=index, arguments=args))

    def finish(self) -> list[StreamEvent]:
        """At end of body: complete the stream if the upstream finished but sent no [DONE].

        A stream cut before any finish_reason yields nothing, so the caller sees
        an unfinished stream and reports it instead of a truncated success.
        """
        if self._ended or not self._started or self._finish is None:
            return []
        return self._end()

    def _end(self) -> list[StreamEvent]:
        self._ended = True
        if not self._started:
            return []
        finish = self._finish or "stop"
        if self._tools and finish == "stop":
            finish = "tool_calls"
        return [StreamEnd(finish_reason=finish, usage=self._usage)]


class StreamRenderer:
    """Neutral stream events -> the exact SSE bytes of chat.completion.chunk objects.

    Text deltas are the hot path: each chunk is a precomputed prefix, the
    escaped delta and a fixed suffix, with no dict building per token.
    """

    def __init__(self, model: str, include_usage: bool = False) -> None:
        self.model = model
        self.include_usage = include_usage
        self._prefix = b""
        self._suffix = b',"usage":null}\n\n' if include_usage else b"}\n\n"
        self._started = False
        self._done = False

    def _start(self, completion_id: str) -> bytes:
        self._started = True
        head = {
            "id": completion_id,
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": self.model,
            "system_fingerprint": None,
        }
        self._prefix = b"data: " + orjson.dumps(head)[:-1] + b',"choices":['
        return self._chunk(b'{"role":"assistant","content":""}')

    def _chunk(self, delta: bytes, finish: bytes = b"null") -> bytes:
        return (
            self._prefix
            + b'{"index":0,"delta":'
            + delta
            + b',"logprobs":null,"finish_reason":'
            + finish
            + b"}]"
            + self._suffix
        )

    def render(self, event: StreamEvent) -> bytes:
        if self._done:
            return b""
        lead = b""
        if not self._started:
            if isinstance(event, StreamStart):
                return self._start(event.id or new_completion_id())
            lead = self._start(new_completion_id())
        if isinstance(event, TextDelta):
            if not event.text:
                return lead
            return lead + self._chunk(b'{"content":' + orjson.dumps(event.text) + b"}")
        if isinstance(event, ToolCallDelta):
            call = {"index": event.index, "function": {"arguments": event.arguments}}
            return lead + self._chunk(orjson.dumps({"tool_calls": [call]}))
        if isinstance(event, ToolCallStart):
            call = {
                "index": event.index,
                "id": event.id,
                "type": "function",
                "function": {"name": event.name, "arguments": ""},
            }
            return lead + self._chunk(orjson.dumps({"tool_calls": [call]}))
        if isinstance(event, ThinkingDelta):
            if not event.text:
                return lead  # signatures have no place in this dialect
            return lead + self._chunk(b'{"reasoning_content":' + orjson.dumps(event.text) + b"}")
        if isinstance(event, StreamEnd):
            self._done = True
            finish = orjson.dumps(FINISH_OUT.get(event.finish_reason, "stop"))
            out = lead + self._chunk(b"{}", finish)
            if self.include_usage:
                usage = orjson.dumps(render_usage(event.usage))
                out += self._prefix + b'],"usage":' + usage + b"}\n\n"
            return out + b"data: [DONE]\n\n"
        return lead  # a second StreamStart: nothing to say
