"""Chat-completions requests: parse a client's body, render an upstream's body."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable
from typing import Any

from tiergate.core.model import (
    ChatRequest,
    ImagePart,
    Message,
    Part,
    TextPart,
    ThinkingPart,
    ToolCall,
    ToolSpec,
)
from tiergate.formats import (
    dumps,
    expect_dict,
    expect_list,
    expect_str,
    opt_bool,
    opt_dict,
    opt_int,
    opt_number,
    opt_str,
)
from tiergate.formats.errors import FormatError
from tiergate.formats.message_memo import MessageMemo, Reuse, parse_messages, parse_tools_reusing
from tiergate.formats.render_memo import HistoryMemo

#: The memo slot namespace of this codec's parses.
MEMO_FORMAT = "openai"

_TOOL_CHOICES = frozenset({"auto", "none", "required"})
_RESPONSE_FORMATS = frozenset({"text", "json_object", "json_schema"})
_SCHEMA_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")

# Request fields the neutral model names; everything else lands in `extra`.
_NAMED = frozenset(
    {
        "model",
        "messages",
        "tools",
        "tool_choice",
        "parallel_tool_calls",
        "stream",
        "stream_options",
        "max_tokens",
        "max_completion_tokens",
        "temperature",
        "top_p",
        "stop",
        "n",
        "response_format",
        "metadata",
        "user",
        "prompt_cache_key",
        "thinking",
    }
)


# ---- inbound request ----------------------------------------------------------


def parse_request(
    body: dict[str, Any],
    memo: MessageMemo | None = None,
    size: int = 0,
    reuse: Reuse | None = None,
) -> ChatRequest:
    """A client's chat-completions body as a neutral request; FormatError if malformed.

    With a `memo` (formats/message_memo.py), the messages this conversation's
    previous request already had are taken from its parse instead of parsed again
    (the result is the same), and this parse is remembered; `size` is the body's
    length in bytes, for the memo's bound; `reuse`, the memo's match when the
    caller already made it (it checks the depth of the new messages only)."""
    body = expect_dict(body, "body")
    model = expect_str(body.get("model"), "model")
    n = body.get("n")
    if n is not None and n != 1:
        raise FormatError("only n=1 is supported", "n")
    raw_messages = expect_list(body.get("messages"), "messages")
    if not raw_messages:
        raise FormatError("messages must not be empty", "messages")
    system: list[TextPart] = []
    messages: list[Message] = []
    if reuse is None and memo is not None:
        reuse = memo.match(MEMO_FORMAT, raw_messages)
    parsed = parse_messages(raw_messages, memo, reuse, _parse_message, system, messages)

    # Both are checked: a malformed max_tokens is refused even when the newer
    # max_completion_tokens (which wins) is present.
    legacy_max = opt_int(body.get("max_tokens"), "max_tokens", 1)
    max_tokens = opt_int(body.get("max_completion_tokens"), "max_completion_tokens", 1)
    if max_tokens is None:
        max_tokens = legacy_max
    stream = bool(opt_bool(body.get("stream"), "stream"))
    stream_options = opt_dict(body.get("stream_options"), "stream_options") or {}
    include = opt_bool(stream_options.get("include_usage"), "stream_options.include_usage")
    response_format = _parse_response_format(body.get("response_format"))
    tools_raw = body.get("tools")
    tools = (
        []
        if tools_raw is None
        else parse_tools_reusing(tools_raw, memo, size, _parse_tools, "openai.tools")
    )
    req = ChatRequest(
        model=model,
        messages=messages,
        system=system,
        tools=tools,
        tool_choice=_parse_tool_choice(body.get("tool_choice")),
        parallel_tool_calls=opt_bool(body.get("parallel_tool_calls"), "parallel_tool_calls"),
        stream=stream,
        include_usage=stream and bool(include),
        max_tokens=max_tokens,
        temperature=opt_number(body.get("temperature"), "temperature", 0.0, 2.0),
        top_p=opt_number(body.get("top_p"), "top_p", 0.0, 1.0),
        stop=_parse_stop(body.get("stop")),
        response_format=response_format,
        metadata=opt_dict(body.get("metadata"), "metadata") or {},
        user=opt_str(body.get("user"), "user"),
        prompt_cache_key=opt_str(body.get("prompt_cache_key"), "prompt_cache_key"),
        thinking=opt_dict(body.get("thinking"), "thinking"),
        extra={k: v for k, v in body.items() if k not in _NAMED},
        source_format="openai",
    )
    if memo is not None and parsed is not None:  # only a body that parsed whole
        memo.store(MEMO_FORMAT, raw_messages, parsed, size, reuse)
    return req


def _parse_response_format(raw: Any) -> dict[str, Any] | None:
    """`response_format` checked as OpenAI checks it, so a malformed one is the
    client's 400 here rather than an upstream rejection retried on every key."""
    rf = opt_dict(raw, "response_format")
    if rf is None:
        return None
    rf_type = rf.get("type")
    if not (isinstance(rf_type, str) and rf_type in _RESPONSE_FORMATS):
        raise FormatError("type must be text, json_object or json_schema", "response_format.type")
    if rf_type != "json_schema":
        return rf
    spec = expect_dict(rf.get("json_schema"), "response_format.json_schema")
    name = expect_str(spec.get("name"), "response_format.json_schema.name")
    if not _SCHEMA_NAME.fullmatch(name):
        raise FormatError(
            "must be 1-64 letters, digits, '_' or '-'", "response_format.json_schema.name"
        )
    opt_dict(spec.get("schema"), "response_format.json_schema.schema")
    opt_bool(spec.get("strict"), "response_format.json_schema.strict")
    opt_str(spec.get("description"), "response_format.json_schema.description")
    return rf


def _parse_message(raw: Any, path: str, system: list[TextPart], out: list[Message]) -> None:
    m = expect_dict(raw, path)
    role = m.get("role")
    content = m.get("content")
    if role in ("system", "developer"):
        texts = [p for p in _text_parts(content, f"{path}.content") if p.text]
        if out:  # inside the conversation: kept in place, where the client put it
            out.append(Message("system", list[Part](texts)))
        else:  # before it: the system prompt
            system.extend(texts)
    elif role == "user":
        name = opt_str(m.get("name"), f"{path}.name")
        out.append(Message("user", _user_parts(content, f"{path}.content"), name=name))
    elif role == "assistant":
        out.append(_parse_assistant(m, path))
    elif role == "tool":
        call_id = expect_str(m.get("tool_call_id"), f"{path}.tool_call_id")
        parts: list[Part] = list(_text_parts(content, f"{path}.content"))
        out.append(Message("tool", parts, tool_call_id=call_id))
    elif role == "function":
        raise FormatError("legacy function messages are not supported; use tools", f"{path}.role")
    else:
        raise FormatError(f"unsupported role {role!r}", f"{path}.role")


def _parse_assistant(m: dict[str, Any], path: str) -> Message:
    parts: list[Part] = []
    # DeepSeek and most OpenAI-compatible servers name it reasoning_content;
    # OpenRouter and newer vLLM name it reasoning.
    reasoning = m.get("reasoning_content") or m.get("reasoning")
    if isinstance(reasoning, str) and reasoning:
        parts.append(ThinkingPart(reasoning))
    content = m.get("content")
    if isinstance(content, list):
        for j, raw in enumerate(content):
            p = expect_dict(raw, f"{path}.content[{j}]")
            kind = p.get("type")
            if kind == "text":
                parts.append(_text_part(p, f"{path}.content[{j}]"))
            elif kind == "refusal":
                parts.append(TextPart(expect_str(p.get("refusal"), f"{path}.content[{j}].refusal")))
            else:
                raise FormatError(f"unsupported content part {kind!r}", f"{path}.content[{j}].type")
    elif content is not None:
        parts.append(TextPart(expect_str(content, f"{path}.content")))
    if m.get("function_call") is not None:
        raise FormatError("function_call is not supported; use tool_calls", f"{path}.function_call")
    calls: list[ToolCall] = []
    raw_calls = m.get("tool_calls")
    if raw_calls is not None:
        for j, raw in enumerate(expect_list(raw_calls, f"{path}.tool_calls")):
            cpath = f"{path}.tool_calls[{j}]"
            c = expect_dict(raw, cpath)
            if c.get("type", "function") != "function":  # e.g. a custom tool's call
                raise FormatError(f"unsupported tool call type {c.get('type')!r}", f"{cpath}.type")
            fn = expect_dict(c.get("function"), f"{cpath}.function")
            args = fn.get("arguments", "")
            if isinstance(args, dict):  # lenient clients send the object itself
                args = dumps(args)
            calls.append(
                ToolCall(
                    id=expect_str(c.get("id"), f"{cpath}.id"),
                    name=expect_str(fn.get("name"), f"{cpath}.function.name"),
                    arguments=expect_str(args, f"{cpath}.function.arguments"),
                )
            )
    name = opt_str(m.get("name"), f"{path}.name")
    return Message("assistant", parts, tool_calls=calls, name=name)


def _text_part(p: dict[str, Any], path: str) -> TextPart:
    # cache_control on OpenAI parts is an OpenRouter/LiteLLM convention; honour it.
    cache = opt_dict(p.get("cache_control"), f"{path}.cache_control")
    return TextPart(expect_str(p.get("text"), f"{path}.text"), cache)


def _text_parts(content: Any, path: str) -> list[TextPart]:
    if content is None:
        return []
    if isinstance(content, str):
        return [TextPart(content)]
    parts = []
    for j, raw in enumerate(expect_list(content, path)):
        p = expect_dict(raw, f"{path}[{j}]")
        if p.get("type") != "text":
            raise FormatError(f"only text parts are allowed here, got {p.get('type')!r}", path)
        parts.append(_text_part(p, f"{path}[{j}]"))
    return parts


def _user_parts(content: Any, path: str) -> list[Part]:
    if isinstance(content, str):
        return [TextPart(content)]
    parts: list[Part] = []
    for j, raw in enumerate(expect_list(content, path)):
        ppath = f"{path}[{j}]"
        p = expect_dict(raw, ppath)
        kind = p.get("type")
        if kind == "text":
            parts.append(_text_part(p, ppath))
        elif kind == "image_url":
            spec = p.get("image_url")
            if not isinstance(spec, str):
                spec = expect_dict(spec, f"{ppath}.image_url").get("url")
            url = spec
            parts.append(image_from_url(expect_str(url, f"{ppath}.image_url.url"), ppath))
        else:
            raise FormatError(f"unsupported content part {kind!r}", f"{ppath}.type")
    return parts


def image_from_url(url: str, path: str) -> ImagePart:
    if not url.startswith("data:"):
        return ImagePart(url=url)
    header, sep, data = url[5:].partition(",")
    media_type, _, encoding = header.partition(";")
    if not sep or encoding != "base64" or not media_type:
        raise FormatError("image data URLs must be data:<media type>;base64,<data>", path)
    return ImagePart(data=data, media_type=media_type)


def _parse_tools(raw: Any) -> list[ToolSpec]:
    return [_parse_tool(t, f"tools[{i}]") for i, t in enumerate(expect_list(raw, "tools"))]


def _parse_tool(raw: Any, path: str) -> ToolSpec:
    t = expect_dict(raw, path)
    if t.get("type", "function") != "function":
        raise FormatError(f"unsupported tool type {t.get('type')!r}", f"{path}.type")
    fn = expect_dict(t.get("function"), f"{path}.function")
    return ToolSpec(
        name=expect_str(fn.get("name"), f"{path}.function.name"),
        description=opt_str(fn.get("description"), f"{path}.function.description") or "",
        parameters=opt_dict(fn.get("parameters"), f"{path}.function.parameters") or {},
        cache_control=opt_dict(t.get("cache_control"), f"{path}.cache_control"),
        strict=opt_bool(fn.get("strict"), f"{path}.function.strict"),
    )


def _parse_tool_choice(raw: Any) -> str | dict[str, Any] | None:
    if raw is None:
        return None
    if isinstance(raw, str):
        if raw not in _TOOL_CHOICES:
            raise FormatError("must be auto, none, required or a function", "tool_choice")
        return raw
    choice = expect_dict(raw, "tool_choice")
    fn = expect_dict(choice.get("function"), "tool_choice.function")
    return {"type": "tool", "name": expect_str(fn.get("name"), "tool_choice.function.name")}


def _parse_stop(raw: Any) -> list[str]:
    if raw is None:
        return []
    if isinstance(raw, str):
        return [raw]
    return [expect_str(s, f"stop[{i}]") for i, s in enumerate(expect_list(raw, "stop"))]


# ---- upstream request ---------------------------------------------------------


def render_request(
    req: ChatRequest, upstream_model: str, *, deepseek: bool = False
) -> dict[str, Any]:
    """The chat-completions body for an OpenAI-dialect upstream."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": p.text} for p in req.system if p.text
    ]
    messages.extend(_history.render(req.messages, deepseek, _one_renderer(deepseek)))
    body: dict[str, Any] = {"model": upstream_model, "messages": messages}
    tools = [t for t in req.tools if t.native is None]  # provider-defined tools: dropped
    if tools:
        body["tools"] = [_render_tool(t, deepseek) for t in tools]
        if req.tool_choice is not None:
            body["tool_choice"] = _render_tool_choice(req.tool_choice)
        if req.parallel_tool_calls is not None and not deepseek:
            body["parallel_tool_calls"] = req.parallel_tool_calls
    if req.stream:
        body["stream"] = True
        # Always: usage is how the gateway bills and scores a streamed answer.
        body["stream_options"] = {"include_usage": True}
    if req.max_tokens is not None:
        body["max_tokens" if deepseek else "max_completion_tokens"] = req.max_tokens
    if req.temperature is not None:
        body["temperature"] = req.temperature
    if req.top_p is not None:
        body["top_p"] = req.top_p
    if req.stop:
        body["stop"] = req.stop[:4]  # OpenAI accepts at most four
    if req.response_format is not None:
        rf = req.response_format
        if deepseek and rf.get("type") == "json_schema":
            rf = {"type": "json_object"}
        body["response_format"] = rf
    if deepseek:
        if req.thinking is not None and req.thinking.get("type") in ("enabled", "disabled"):
            body["thinking"] = {"type": req.thinking["type"]}
    else:
        if req.user is not None:
            body["user"] = req.user
        if req.prompt_cache_key is not None:
            body["prompt_cache_key"] = req.prompt_cache_key
    if req.source_format == "openai":
        for key, value in req.extra.items():
            body.setdefault(key, value)
        # OpenAI stores metadata only with store=true and rejects it otherwise.
        if req.metadata and req.extra.get("store") is True:
            body["metadata"] = req.metadata
    return body


RENDER_MEMO_CHARS = 4 * 1024 * 1024
"""Characters of rendered text remembered, with RENDER_ENTRY_OVERHEAD per entry
(about that many bytes held alive). A message the message memo reused is the
same object in the next request, so its rendering is too (a dict nothing
mutates: it is only serialised); an entry holds its message, so an id is never
reused for another one while remembered. Purely a cache: results are identical."""

#: What an entry costs beyond its text (the message, the dicts, the key), counted
#: in the same units, so a memo of short messages stays small too.
RENDER_ENTRY_OVERHEAD = 512

_render_memo: dict[tuple[int, bool], tuple[Message, dict[str, Any], int]] = {}
_render_memo_chars = 0


def _chars(out: dict[str, Any]) -> int:
    content = out.get("content")
    if isinstance(content, str):
        n = len(content)
    else:  # parts: text, or an image URL (a data: URL can be long)
        n = sum(len(str(p.get("text") or p.get("image_url") or "")) for p in content or ())
    calls = sum(len(c["function"]["arguments"]) for c in out.get("tool_calls") or ())
    return n + calls + RENDER_ENTRY_OVERHEAD


#: each conversation's rendered history, for its next turn (formats/render_memo.py)
_history: HistoryMemo[dict[str, Any]] = HistoryMemo()


def _one_renderer(deepseek: bool) -> Callable[[Message], dict[str, Any] | None]:
    def render(m: Message) -> dict[str, Any] | None:
        if m.role == "system" and not m.text():  # an emptied (cleared) system message goes
            return None
        return _rendered(m, deepseek)

    return render


def _rendered(m: Message, deepseek: bool) -> dict[str, Any]:
    """`_render_message`, memoised by the message's identity (oldest entries go first)."""
    global _render_memo_chars
    key = (id(m), deepseek)
    hit = _render_memo.get(key)
    if hit is not None and hit[0] is m:
        return hit[1]
    out = _render_message(m, deepseek)
    size = _chars(out)
    _render_memo[key] = (m, out, size)
    _render_memo_chars += size
    while _render_memo_chars > RENDER_MEMO_CHARS and _render_memo:
        # StopIteration/RuntimeError: emptied or resized by another thread meanwhile.
        with contextlib.suppress(StopIteration, RuntimeError, KeyError):
            _render_memo_chars -= _render_memo.pop(next(iter(_render_memo)))[2]
    return out


def _render_message(m: Message, deepseek: bool) -> dict[str, Any]:
    if m.role == "system":  # a mid-conversation instruction stays where it was sent
        return {"role": "system", "content": m.text()}
    if m.role == "tool":
        # Tool results carry text only: images in them are dropped (see docs).
        texts = [p.text for p in m.content if isinstance(p, TextPart) and p.text]
        content: str | list[dict[str, str]] = (
            texts[0] if len(texts) == 1 else [{"type": "text", "text": t} for t in texts] or ""
        )
        return {"role": "tool", "tool_call_id": m.tool_call_id or "", "content": content}
    if m.role == "assistant":
        text = "".join(p.text for p in m.content if isinstance(p, TextPart))
        out: dict[str, Any] = {"role": "assistant", "content": text or None}
        if m.tool_calls:
            out["tool_calls"] = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments},
                }
                for c in m.tool_calls
            ]
        elif not text:
            out["content"] = ""
        if deepseek:
            reasoning = "".join(
                p.text for p in m.content if isinstance(p, ThinkingPart) and not p.redacted
            )
            if reasoning:
                out["reasoning_content"] = reasoning
        if m.name:
            out["name"] = m.name
        return out
    parts = [p for p in m.content if isinstance(p, TextPart | ImagePart)]
    if deepseek:
        parts = [p for p in parts if isinstance(p, TextPart)]
    user: dict[str, Any] = {"role": "user"}
    if not parts:
        user["content"] = ""
    elif len(parts) == 1 and isinstance(parts[0], TextPart):
        user["content"] = parts[0].text
    else:
        user["content"] = [_render_user_part(p) for p in parts]
    if m.name:
        user["name"] = m.name
    return user


def _render_user_part(p: TextPart | ImagePart) -> dict[str, Any]:
    if isinstance(p, TextPart):
        return {"type": "text", "text": p.text}
    url = p.url if p.url is not None else f"data:{p.media_type or 'image/png'};base64,{p.data}"
    return {"type": "image_url", "image_url": {"url": url}}


def _render_tool(t: ToolSpec, deepseek: bool) -> dict[str, Any]:
    fn: dict[str, Any] = {"name": t.name}
    if t.description:
        fn["description"] = t.description
    fn["parameters"] = t.parameters or {"type": "object", "properties": {}}
    if t.strict is not None and not deepseek:
        fn["strict"] = t.strict
    return {"type": "function", "function": fn}


def _render_tool_choice(choice: str | dict[str, Any]) -> str | dict[str, Any]:
    if isinstance(choice, str):
        return choice
    return {"type": "function", "function": {"name": choice["name"]}}
