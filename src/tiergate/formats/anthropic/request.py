"""Messages requests: parse a client's body into the neutral model.

Rendering an upstream's body is `render.py`; the constants both share live here."""

from __future__ import annotations

import operator
from dataclasses import replace
from typing import Any

from tiergate.core.model import (
    ChatRequest,
    ImagePart,
    Message,
    Part,
    RawBlock,
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

DEFAULT_MAX_TOKENS = 4096  # Anthropic requires max_tokens; OpenAI clients often omit it
MIN_THINKING_BUDGET = 1024  # Anthropic's floor for thinking.budget_tokens
DEFAULT_THINKING_BUDGET = 2048
EPHEMERAL = {"type": "ephemeral"}
# The beta that lets `role: "system"` messages sit inside `messages`.
MID_CONVERSATION_SYSTEM_BETA = "mid-conversation-system-"
# Betas about the client's own credential: tiergate calls upstream with its key.
_CLIENT_AUTH_BETAS = ("oauth-",)

THINKING_BLOCKS = frozenset({"thinking", "redacted_thinking"})
#: The memo slot namespace of this codec's parses.
MEMO_FORMAT = "anthropic"

_NAMED = frozenset(
    {
        "model",
        "messages",
        "system",
        "tools",
        "tool_choice",
        "max_tokens",
        "metadata",
        "stop_sequences",
        "stream",
        "temperature",
        "top_p",
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
    """A client's messages body as a neutral request; FormatError if malformed.

    With a `memo` (formats/message_memo.py), the messages this conversation's
    previous request already had are taken from its parse (the result is the same:
    a message's parse depends only on the messages before it, never on the body's
    `system`), and this parse is remembered; `size` is the body's length in bytes,
    for the memo's bound; `reuse`, the memo's match when the caller made it."""
    body = expect_dict(body, "body")
    model = expect_str(body.get("model"), "model")
    max_tokens = opt_int(body.get("max_tokens"), "max_tokens", 1)
    if max_tokens is None:
        raise FormatError("max_tokens is required", "max_tokens")
    raw_messages = expect_list(body.get("messages"), "messages")
    if not raw_messages:
        raise FormatError("at least one message is required", "messages")
    system = _parse_system(body.get("system"))
    messages: list[Message] = []
    if reuse is None and memo is not None:
        reuse = memo.match(MEMO_FORMAT, raw_messages)
    parsed = parse_messages(raw_messages, memo, reuse, _parse_message, system, messages)
    if not messages:
        raise FormatError("at least one user or assistant message is required", "messages")
    messages = _apply_clear_at(messages)
    tools_raw = body.get("tools")
    tools = (
        []
        if tools_raw is None
        else parse_tools_reusing(tools_raw, memo, size, _parse_tools, "anthropic.tools")
    )
    tool_choice, parallel = _parse_tool_choice(body.get("tool_choice"))
    stops = body.get("stop_sequences")
    stop = (
        [
            expect_str(s, f"stop_sequences[{i}]")
            for i, s in enumerate(expect_list(stops, "stop_sequences"))
        ]
        if stops is not None
        else []
    )
    req = ChatRequest(
        model=model,
        messages=messages,
        system=system,
        tools=tools,
        tool_choice=tool_choice,
        parallel_tool_calls=parallel,
        stream=bool(opt_bool(body.get("stream"), "stream")),
        max_tokens=max_tokens,
        temperature=opt_number(body.get("temperature"), "temperature", 0.0, 1.0),
        top_p=opt_number(body.get("top_p"), "top_p", 0.0, 1.0),
        stop=stop,
        metadata=opt_dict(body.get("metadata"), "metadata") or {},
        thinking=opt_dict(body.get("thinking"), "thinking"),
        response_format=_output_format(body.get("output_config")),
        extra={k: v for k, v in body.items() if k not in _NAMED},
        source_format="anthropic",
    )
    if memo is not None and parsed is not None:  # only a body that parsed whole
        memo.store(MEMO_FORMAT, raw_messages, parsed, size, reuse)
    return req


def parse_count_request(body: dict[str, Any]) -> ChatRequest:
    """A count_tokens body (a Messages body without `max_tokens`) as a neutral request."""
    body = expect_dict(body, "body")
    if body.get("max_tokens") is None:
        body = {**body, "max_tokens": DEFAULT_MAX_TOKENS}
    return parse_request(body)


def parse_betas(values: list[str]) -> tuple[str, ...]:
    """The `anthropic-beta` header values (comma-separated, maybe repeated), in order."""
    names = (b.strip() for v in values for b in v.split(","))
    return tuple(dict.fromkeys(b for b in names if b))


def upstream_betas(req: ChatRequest) -> list[str]:
    """The client's `anthropic-beta` values an Anthropic upstream receives."""
    return [b for b in req.betas if not b.startswith(_CLIENT_AUTH_BETAS)]


def _output_format(raw: Any) -> dict[str, Any] | None:
    """`output_config.format` (structured outputs) as the neutral response_format,
    so upstreams of other formats still constrain the answer. `output_config`
    itself stays in `extra` and reaches Anthropic upstreams verbatim."""
    config = opt_dict(raw, "output_config")
    fmt = opt_dict((config or {}).get("format"), "output_config.format")
    if fmt is None or fmt.get("type") != "json_schema":
        return None
    schema = opt_dict(fmt.get("schema"), "output_config.format.schema") or {}
    return {"type": "json_schema", "json_schema": {"name": "output", "schema": schema}}


def _parse_system(raw: Any) -> list[TextPart]:
    if raw is None:
        return []
    if isinstance(raw, str):
        return [TextPart(raw)] if raw else []
    parts = []
    for i, block in enumerate(expect_list(raw, "system")):
        b = expect_dict(block, f"system[{i}]")
        if b.get("type") != "text":
            raise FormatError("system blocks must be text", f"system[{i}].type")
        parts.append(_text(b, f"system[{i}]"))
    return parts


def _text(b: dict[str, Any], path: str) -> TextPart:
    return TextPart(
        expect_str(b.get("text"), f"{path}.text"),
        opt_dict(b.get("cache_control"), f"{path}.cache_control"),
    )


def _blocks(content: Any, path: str) -> list[Any]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return expect_list(content, path)


def _block_kind(b: dict[str, Any], path: str) -> str:
    return expect_str(b.get("type"), f"{path}.type")


def _parse_message(raw: Any, path: str, system: list[TextPart], out: list[Message]) -> None:
    m = expect_dict(raw, path)
    role = m.get("role")
    if role == "system":
        instruction = _parse_system_message(m, path)
        if out:
            out.append(Message("system", instruction, raw=m))
        else:  # before the conversation starts it is the system prompt
            system.extend(p for p in instruction if isinstance(p, TextPart) and p.text)
        return
    blocks = _blocks(m.get("content"), f"{path}.content")
    if role == "user":
        results: list[Message] = []
        parts: list[Part] = []
        for j, block in enumerate(blocks):
            bpath = f"{path}.content[{j}]"
            b = expect_dict(block, bpath)
            kind = _block_kind(b, bpath)
            if kind == "tool_result":
                results.append(_parse_tool_result(b, bpath))
            elif kind == "text":
                parts.append(_text(b, bpath))
            elif kind == "image":
                parts.append(_parse_image(b, bpath))
            else:  # a document, a search result, a newer block: kept verbatim
                parts.append(RawBlock(b))
        # Tool results answer the previous assistant turn, so they come first.
        out.extend(results)
        if parts or not results:
            out.append(Message("user", parts))
    elif role == "assistant":
        out.append(_parse_assistant(blocks, path))
    else:
        raise FormatError(f"unsupported role {role!r}", f"{path}.role")


_role = operator.attrgetter("role")


def _apply_clear_at(messages: list[Message]) -> list[Message]:
    """A system message with `clear_at: "next_user_message"` is shown to the model
    only until a later user message exists; upstreams that cannot be told so get
    it emptied (Anthropic upstreams still receive it as sent, in `raw`). The
    emptied message is a copy: the parsed one may be the message memo's, shared
    with a later request whose history differs after it."""
    if "system" not in map(_role, messages):  # the usual case, checked in C
        return messages
    later_user = False
    out = messages
    for i in range(len(messages) - 1, -1, -1):
        m = messages[i]
        if m.role in ("user", "tool"):  # a tool_result message is a user message
            later_user = True
        elif later_user and m.raw is not None and m.raw.get("clear_at") == "next_user_message":
            if out is messages:
                out = list(messages)
            out[i] = replace(m, content=[])
    return out


def _parse_system_message(m: dict[str, Any], path: str) -> list[Part]:
    """A mid-conversation system message's content. It may have none when it only
    carries a per-turn `output_config`."""
    content = m.get("content")
    if content is None and opt_dict(m.get("output_config"), f"{path}.output_config"):
        return []
    parts: list[Part] = []
    for j, block in enumerate(_blocks(content, f"{path}.content")):
        bpath = f"{path}.content[{j}]"
        b = expect_dict(block, bpath)
        if _block_kind(b, bpath) == "text":
            parts.append(_text(b, bpath))
        else:  # e.g. tool_addition / tool_removal (mid-conversation tool changes)
            parts.append(RawBlock(b))
    return parts


def _parse_assistant(blocks: list[Any], path: str) -> Message:
    parts: list[Part] = []
    calls: list[ToolCall] = []
    for j, block in enumerate(blocks):
        bpath = f"{path}.content[{j}]"
        b = expect_dict(block, bpath)
        kind = _block_kind(b, bpath)
        if kind == "text":
            parts.append(_text(b, bpath))
        elif kind == "thinking":
            signature = b.get("signature")
            parts.append(
                ThinkingPart(
                    expect_str(b.get("thinking"), f"{bpath}.thinking"),
                    signature=signature if isinstance(signature, str) else None,
                )
            )
        elif kind == "redacted_thinking":
            parts.append(ThinkingPart(expect_str(b.get("data"), f"{bpath}.data"), redacted=True))
        elif kind == "tool_use":
            calls.append(
                ToolCall(
                    id=expect_str(b.get("id"), f"{bpath}.id"),
                    name=expect_str(b.get("name"), f"{bpath}.name"),
                    arguments=dumps(expect_dict(b.get("input", {}), f"{bpath}.input")),
                )
            )
        else:  # server tool use and its results, newer blocks: kept verbatim
            parts.append(RawBlock(b))
    return Message("assistant", parts, tool_calls=calls)


def _parse_tool_result(b: dict[str, Any], path: str) -> Message:
    call_id = expect_str(b.get("tool_use_id"), f"{path}.tool_use_id")
    content = b.get("content")
    parts: list[Part] = []
    if content is not None:
        for k, block in enumerate(_blocks(content, f"{path}.content")):
            ipath = f"{path}.content[{k}]"
            inner = expect_dict(block, ipath)
            kind = _block_kind(inner, ipath)
            if kind == "text":
                parts.append(_text(inner, ipath))
            elif kind == "image":
                parts.append(_parse_image(inner, ipath))
            else:  # a document, a search result, a tool reference: kept verbatim
                parts.append(RawBlock(inner))
    cache = opt_dict(b.get("cache_control"), f"{path}.cache_control")
    if cache is not None:
        # The breakpoint sits at the end of the result; its last text part carries it.
        if parts and isinstance(parts[-1], TextPart):
            parts[-1].cache_control = cache
        else:
            parts.append(TextPart("", cache))
    is_error = opt_bool(b.get("is_error"), f"{path}.is_error")
    return Message("tool", parts, tool_call_id=call_id, is_error=bool(is_error))


def _parse_image(b: dict[str, Any], path: str) -> ImagePart | RawBlock:
    """base64 and URL images convert; other sources (a Files API id) stay verbatim."""
    src = expect_dict(b.get("source"), f"{path}.source")
    kind = expect_str(src.get("type"), f"{path}.source.type")
    if kind == "base64":
        return ImagePart(
            data=expect_str(src.get("data"), f"{path}.source.data"),
            media_type=expect_str(src.get("media_type"), f"{path}.source.media_type"),
        )
    if kind == "url":
        return ImagePart(url=expect_str(src.get("url"), f"{path}.source.url"))
    return RawBlock(b)


def _parse_tools(raw: Any) -> list[ToolSpec]:
    return [_parse_tool(t, f"tools[{i}]") for i, t in enumerate(expect_list(raw, "tools"))]


def _parse_tool(raw: Any, path: str) -> ToolSpec:
    t = expect_dict(raw, path)
    kind = opt_str(t.get("type"), f"{path}.type")
    if kind not in (None, "custom"):
        # A server or client tool Anthropic defines (web_search_*, bash_*, ...).
        return ToolSpec(name=expect_str(t.get("name"), f"{path}.name"), native=t)
    return ToolSpec(
        name=expect_str(t.get("name"), f"{path}.name"),
        description=opt_str(t.get("description"), f"{path}.description") or "",
        parameters=expect_dict(t.get("input_schema"), f"{path}.input_schema"),
        cache_control=opt_dict(t.get("cache_control"), f"{path}.cache_control"),
        strict=opt_bool(t.get("strict"), f"{path}.strict"),
    )


def _parse_tool_choice(raw: Any) -> tuple[str | dict[str, Any] | None, bool | None]:
    if raw is None:
        return None, None
    c = expect_dict(raw, "tool_choice")
    disable = opt_bool(c.get("disable_parallel_tool_use"), "tool_choice.disable_parallel_tool_use")
    parallel = None if disable is None else not disable
    kind = c.get("type")
    if kind == "auto":
        return "auto", parallel
    if kind == "any":
        return "required", parallel
    if kind == "none":
        return "none", parallel
    if kind == "tool":
        return {"type": "tool", "name": expect_str(c.get("name"), "tool_choice.name")}, parallel
    raise FormatError("type must be auto, any, tool or none", "tool_choice.type")


# ---- upstream request ---------------------------------------------------------
