"""Messages requests: parse a client's body, render an upstream's body."""

from __future__ import annotations

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
    folded_system_text,
)
from tiergate.formats import (
    arguments_object,
    dumps,
    expect_dict,
    expect_list,
    expect_str,
    is_gemini_signature,
    opt_bool,
    opt_dict,
    opt_int,
    opt_number,
    opt_str,
    safe_tool_id,
)
from tiergate.formats.errors import FormatError

DEFAULT_MAX_TOKENS = 4096  # Anthropic requires max_tokens; OpenAI clients often omit it
MIN_THINKING_BUDGET = 1024  # Anthropic's floor for thinking.budget_tokens
DEFAULT_THINKING_BUDGET = 2048
EPHEMERAL = {"type": "ephemeral"}
# The beta that lets `role: "system"` messages sit inside `messages`.
MID_CONVERSATION_SYSTEM_BETA = "mid-conversation-system-"
# Betas about the client's own credential: tiergate calls upstream with its key.
_CLIENT_AUTH_BETAS = ("oauth-",)

_THINKING_BLOCKS = frozenset({"thinking", "redacted_thinking"})
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


def parse_request(body: dict[str, Any]) -> ChatRequest:
    """A client's messages body as a neutral request; FormatError if malformed."""
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
    for i, raw in enumerate(raw_messages):
        _parse_message(raw, f"messages[{i}]", system, messages)
    if not messages:
        raise FormatError("at least one user or assistant message is required", "messages")
    _apply_clear_at(messages)
    tools_raw = body.get("tools")
    tools = (
        [_parse_tool(t, f"tools[{i}]") for i, t in enumerate(expect_list(tools_raw, "tools"))]
        if tools_raw is not None
        else []
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
    return ChatRequest(
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


def _apply_clear_at(messages: list[Message]) -> None:
    """A system message with `clear_at: "next_user_message"` is shown to the model
    only until a later user message exists; upstreams that cannot be told so get
    it emptied (Anthropic upstreams still receive it as sent, in `raw`)."""
    later_user = False
    for m in reversed(messages):
        if m.role in ("user", "tool"):  # a tool_result message is a user message
            later_user = True
        elif later_user and m.raw is not None and m.raw.get("clear_at") == "next_user_message":
            m.content = []


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


def render_request(req: ChatRequest, upstream_model: str) -> dict[str, Any]:
    """The Messages API body for an Anthropic upstream."""
    max_tokens = req.max_tokens or DEFAULT_MAX_TOKENS
    body: dict[str, Any] = {"model": upstream_model, "max_tokens": max_tokens}
    system = [_text_block(p) for p in req.system if p.text]
    same_format = req.source_format == "anthropic"
    in_place = same_format and any(b.startswith(MID_CONVERSATION_SYSTEM_BETA) for b in req.betas)
    messages = _render_messages(req.messages, same_format, in_place)
    if req.source_format != "anthropic" and not _has_cache_control(req):
        _add_cache_breakpoints(system, messages)
    if system:
        body["system"] = system
    body["messages"] = messages

    tools = [_render_tool(t) for t in req.tools if t.native is None or same_format]
    choice = _render_tool_choice(req.tool_choice) if tools else None
    if not tools and any(m.tool_calls for m in req.messages):
        # Anthropic refuses tool_use history without tool definitions: declare
        # the names used, uncallable.
        names = dict.fromkeys(c.name for m in req.messages for c in m.tool_calls)
        tools = [{"name": n, "input_schema": {"type": "object"}} for n in names]
        choice = {"type": "none"}
    if tools:
        body["tools"] = tools
        if req.parallel_tool_calls is False and (choice or {}).get("type") != "none":
            choice = {**(choice or {"type": "auto"}), "disable_parallel_tool_use": True}
        if choice is not None:
            body["tool_choice"] = choice

    thinking = _render_thinking(req.thinking, max_tokens, messages, same_format)
    if thinking is not None:
        body["thinking"] = thinking
    if thinking is None or thinking.get("type") == "disabled":
        # Thinking forbids sampling overrides; newer models reject both at once.
        if req.temperature is not None:
            body["temperature"] = min(req.temperature, 1.0)
        elif req.top_p is not None:
            body["top_p"] = req.top_p
    stop = [s for s in req.stop if s.strip()]  # Anthropic rejects whitespace-only stops
    if stop:
        body["stop_sequences"] = stop
    user_id = req.metadata.get("user_id")
    if not isinstance(user_id, str):
        user_id = req.user
    if user_id:
        body["metadata"] = {"user_id": user_id}
    if req.stream:
        body["stream"] = True
    if req.source_format == "anthropic":
        for key, value in req.extra.items():
            body.setdefault(key, value)
    return body


def _text_block(p: TextPart) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "text", "text": p.text}
    if p.cache_control is not None:
        block["cache_control"] = p.cache_control
    return block


def _image_block(p: ImagePart) -> dict[str, Any]:
    if p.url is not None:
        return {"type": "image", "source": {"type": "url", "url": p.url}}
    source = {"type": "base64", "media_type": p.media_type or "image/png", "data": p.data or ""}
    return {"type": "image", "source": source}


def _render_messages(
    messages: list[Message], raw: bool, system_in_place: bool
) -> list[dict[str, Any]]:
    """Consecutive tool results, and the user text after them, become one user message.

    `raw`: the client spoke this format, so its verbatim blocks go back as sent.
    A system message stays in place when the client sent it with the
    mid-conversation-system beta. Otherwise (earlier models have no system role
    in `messages`) it is folded, marked, into the next user message, after its
    tool results, or into the previous one when no user message follows.
    """
    out: list[dict[str, Any]] = []
    results: list[dict[str, Any]] = []
    folded: list[dict[str, Any]] = []
    for m in messages:
        if m.role == "tool":
            results.append(_tool_result_block(m, raw))
        elif m.role == "user":
            blocks = results + folded + _user_blocks(m.content, raw)
            results, folded = [], []
            if blocks:
                out.append({"role": "user", "content": blocks})
        elif m.role == "system" and system_in_place:
            _flush_user(out, results, folded)
            results = []
            if raw and m.raw is not None:
                out.append(m.raw)  # as sent: clear_at and output_config included
            else:
                blocks = _user_blocks(m.content, raw)
                if blocks:
                    out.append({"role": "system", "content": blocks})
        elif m.role == "system":
            if m.text():
                folded.append({"type": "text", "text": folded_system_text(m)})
        else:
            _flush_user(out, results, folded)
            results, folded = [], []
            blocks = _assistant_blocks(m, raw)
            if blocks:
                out.append({"role": "assistant", "content": blocks})
    _flush_user(out, results, folded)
    return out


def _flush_user(
    out: list[dict[str, Any]], results: list[dict[str, Any]], folded: list[dict[str, Any]]
) -> None:
    """Emit pending tool results (and folded system text) before a non-user message."""
    if results:
        out.append({"role": "user", "content": results + folded})
    elif folded and out and out[-1]["role"] == "user":
        out[-1]["content"].extend(folded)
    elif folded:
        out.append({"role": "user", "content": list(folded)})


def _user_blocks(parts: list[Part], raw: bool) -> list[dict[str, Any]]:
    blocks = []
    for p in parts:
        if isinstance(p, TextPart):
            if p.text:  # Anthropic rejects empty text blocks
                blocks.append(_text_block(p))
        elif isinstance(p, ImagePart):
            blocks.append(_image_block(p))
        elif isinstance(p, RawBlock) and raw and p.source == "anthropic":
            blocks.append(p.block)
    return blocks


def _assistant_blocks(m: Message, raw: bool) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for p in m.content:
        if isinstance(p, ThinkingPart):
            if p.redacted:
                blocks.append({"type": "redacted_thinking", "data": p.text})
            elif p.signature and not is_gemini_signature(p.signature):
                # Unsigned (DeepSeek, OpenAI) or Gemini-signed thinking fails validation.
                blocks.append({"type": "thinking", "thinking": p.text, "signature": p.signature})
        elif isinstance(p, TextPart) and p.text:
            blocks.append(_text_block(p))
        elif isinstance(p, RawBlock) and raw and p.source == "anthropic":
            blocks.append(p.block)
    for c in m.tool_calls:
        blocks.append(
            {
                "type": "tool_use",
                "id": safe_tool_id(c.id),
                "name": c.name,
                "input": arguments_object(c.arguments),
            }
        )
    return blocks


def _tool_result_block(m: Message, raw: bool) -> dict[str, Any]:
    block: dict[str, Any] = {
        "type": "tool_result",
        "tool_use_id": safe_tool_id(m.tool_call_id or ""),
    }
    cache = next(
        (
            p.cache_control
            for p in reversed(m.content)
            if isinstance(p, TextPart) and p.cache_control
        ),
        None,
    )
    parts = [
        p
        for p in m.content
        if (isinstance(p, TextPart) and p.text)
        or isinstance(p, ImagePart)
        or (isinstance(p, RawBlock) and raw and p.source == "anthropic")
    ]
    first = parts[0] if len(parts) == 1 else None
    if isinstance(first, TextPart):
        block["content"] = first.text
    elif parts:
        block["content"] = [_result_part(p) for p in parts]
    if m.is_error:
        block["is_error"] = True
    if cache is not None:
        block["cache_control"] = cache
    return block


def _result_part(p: Part) -> dict[str, Any]:
    if isinstance(p, TextPart):
        return {"type": "text", "text": p.text}
    if isinstance(p, ImagePart):
        return _image_block(p)
    assert isinstance(p, RawBlock)
    return p.block


def _has_cache_control(req: ChatRequest) -> bool:
    return (
        any(p.cache_control for p in req.system)
        or any(t.cache_control for t in req.tools)
        or any(isinstance(p, TextPart) and p.cache_control for m in req.messages for p in m.content)
    )


def _add_cache_breakpoints(system: list[dict[str, Any]], messages: list[dict[str, Any]]) -> None:
    """Mark the end of the system prompt and of the conversation for prompt caching.

    Anthropic caches only up to explicit breakpoints; OpenAI clients cannot
    set them. The system breakpoint keeps tools + system warm across sessions;
    the last-block breakpoint lets the next turn of this session read the whole
    history (Anthropic looks back up to 20 blocks for an earlier entry).
    """
    if system:
        system[-1]["cache_control"] = dict(EPHEMERAL)
    if messages:
        for block in reversed(messages[-1]["content"]):
            if block["type"] not in _THINKING_BLOCKS:  # thinking blocks cannot be marked
                block["cache_control"] = dict(EPHEMERAL)
                break


def _render_tool(t: ToolSpec) -> dict[str, Any]:
    if t.native is not None:
        return t.native
    tool: dict[str, Any] = {
        "name": t.name,
        "input_schema": t.parameters or {"type": "object", "properties": {}},
    }
    if t.description:
        tool["description"] = t.description
    if t.cache_control is not None:
        tool["cache_control"] = t.cache_control
    return tool


def _render_tool_choice(choice: str | dict[str, Any] | None) -> dict[str, Any] | None:
    if choice is None:
        return None
    if isinstance(choice, dict):
        return {"type": "tool", "name": choice["name"]}
    return {"type": {"auto": "auto", "required": "any", "none": "none"}.get(choice, "auto")}


def _render_thinking(
    thinking: dict[str, Any] | None,
    max_tokens: int,
    messages: list[dict[str, Any]],
    same_format: bool,
) -> dict[str, Any] | None:
    """The thinking config for the upstream. An Anthropic client's adaptive config
    keeps its options (display, ...) and a newer type goes as sent."""
    if not thinking:
        return None
    kind = thinking.get("type")
    if kind == "disabled":
        return {"type": "disabled"}
    if kind not in ("enabled", "adaptive") and not (same_format and isinstance(kind, str)):
        return None
    # Mid tool loop, Anthropic demands the last assistant turn open with a signed
    # thinking block; a turn served by another provider has none, so think next turn.
    last = next((m for m in reversed(messages) if m["role"] == "assistant"), None)
    if (
        last is not None
        and any(b["type"] == "tool_use" for b in last["content"])
        and last["content"][0]["type"] not in _THINKING_BLOCKS
    ):
        return None
    if kind == "adaptive":
        return dict(thinking) if same_format else {"type": "adaptive"}
    if kind != "enabled":
        return dict(thinking)
    budget = thinking.get("budget_tokens")
    budget = budget if isinstance(budget, int) else DEFAULT_THINKING_BUDGET
    if max_tokens <= MIN_THINKING_BUDGET:
        return None  # no room: budget must be >= 1024 and < max_tokens
    return {
        "type": "enabled",
        "budget_tokens": min(max(budget, MIN_THINKING_BUDGET), max_tokens - 1),
    }
