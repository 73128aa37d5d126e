"""Messages requests: render the neutral model as an Anthropic upstream's body.

The inverse of `request.py` (parsing a client's body); split so each file holds
one direction.
"""

from __future__ import annotations

import itertools
from bisect import bisect_right
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from tiergate.core.model import (
    ChatRequest,
    ImagePart,
    Message,
    Part,
    RawBlock,
    TextPart,
    ThinkingPart,
    ToolSpec,
    folded_system_text,
)
from tiergate.core.same_objects import identical_prefix
from tiergate.formats import (
    arguments_object,
    is_gemini_signature,
    safe_tool_id,
)
from tiergate.formats.anthropic.request import (
    DEFAULT_MAX_TOKENS,
    DEFAULT_THINKING_BUDGET,
    EPHEMERAL,
    MID_CONVERSATION_SYSTEM_BETA,
    MIN_THINKING_BUDGET,
    THINKING_BLOCKS,
)
from tiergate.formats.render_memo import HistoryMemo, IdentityMemo, MessageWrappers

RENDER_MEMO_CHARS = 4 * 1024 * 1024
"""Characters of rendered messages remembered (formats/render_memo.py): the
history the message memo reused renders once per conversation, not per turn."""

_memo: IdentityMemo[object] = IdentityMemo(RENDER_MEMO_CHARS)
#: each conversation's messages' tool-call names, for a request that sends no tools
_called_names: HistoryMemo[tuple[str, ...]] = HistoryMemo()


def _tool_names(m: Message) -> tuple[str, ...]:
    return tuple(c.name for c in m.tool_calls)


#: the same message dicts for the same remembered blocks, so the upstream encoder
#: finds last turn's messages in this one (formats/body_encode.py)
_wrappers = MessageWrappers()


def _message_chars(m: Message) -> int:
    text = sum(len(p.text) for p in m.content if isinstance(p, TextPart | ThinkingPart))
    return text + sum(len(c.arguments) for c in m.tool_calls)


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
    if not tools:
        # Anthropic refuses tool_use history without tool definitions: declare
        # the names used, uncallable (each message's names remembered per
        # conversation, so the history is not walked again every turn).
        called = _called_names.render(req.messages, None, _tool_names)
        names = dict.fromkeys(itertools.chain.from_iterable(called))
        if names:
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


@dataclass(slots=True)
class _History:
    """A conversation's last rendered history, resumable where nothing was pending."""

    sources: list[Message]
    out: list[dict[str, Any]]  #: before the final flush
    clean: list[int]  #: source counts after which no tool result or folded text waited
    lengths: list[int]  #: len(out) at each of them


#: Conversations whose rendered history is kept (pointers only), least recent first out.
HISTORY_SLOTS = 128
_histories: OrderedDict[tuple[int, bool, bool], _History] = OrderedDict()


def _render_messages(
    messages: list[Message], raw: bool, system_in_place: bool
) -> list[dict[str, Any]]:
    """Consecutive tool results, and the user text after them, become one user message.

    `raw`: the client spoke this format, so its verbatim blocks go back as sent.
    A system message stays in place when the client sent it with the
    mid-conversation-system beta. Otherwise (earlier models have no system role
    in `messages`) it is folded, marked, into the next user message, after its
    tool results, or into the previous one when no user message follows.

    The walk resumes from the conversation's previous render: its output up to
    the last point inside the sources both share (the same Message objects, as
    the message memo hands them over) where nothing was pending is exact, so a
    turn renders its new messages only (issue #30: the walk over the whole
    history was the Anthropic upstream's largest cost growing with the session).
    """
    if not messages:
        return []
    key = (id(messages[0]), raw, system_in_place)
    start, out, clean, lengths = 0, [], [], []
    old = _histories.pop(key, None)
    if old is not None and old.sources[0] is messages[0]:
        j = bisect_right(old.clean, identical_prefix(old.sources, messages))
        if j:
            start, out = old.clean[j - 1], old.out[: old.lengths[j - 1]]
            clean, lengths = old.clean[:j], old.lengths[:j]
    results: list[dict[str, Any]] = []
    folded: list[dict[str, Any]] = []
    for i in range(start, len(messages)):
        m = messages[i]
        replaced = False
        if m.role == "tool":
            results.append(_rendered(m, "tool", raw))
        elif m.role == "user":
            user = _rendered(m, "user", raw)
            blocks = results + folded + user
            results, folded = [], []
            if blocks:
                out.append(_wrappers.wrap("user", blocks))
        elif m.role == "system" and system_in_place:
            replaced = _flush_user(out, results, folded)
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
            replaced = _flush_user(out, results, folded)
            results, folded = [], []
            blocks = _rendered(m, "assistant", raw)
            if blocks:
                out.append(_wrappers.wrap("assistant", blocks))
        if replaced:  # a message rendered before a checkpoint changed: not resumable there
            while lengths and lengths[-1] >= len(out) - 1:
                clean.pop()
                lengths.pop()
        if not results and not folded:
            clean.append(i + 1)
            lengths.append(len(out))
    _histories[key] = _History(list(messages), out, clean, lengths)
    while len(_histories) > HISTORY_SLOTS:
        _histories.popitem(last=False)
    rendered = list(out)
    _flush_user(rendered, results, folded)
    return rendered


def _rendered(m: Message, kind: str, raw: bool) -> Any:
    """A message's rendered blocks (`kind`: "tool", "user" or "assistant"), through the
    render memo: shared with earlier requests, so read-only."""
    remembered = _memo.hit(m, (kind, raw))
    if remembered is not None:
        return remembered

    def render() -> Any:
        if kind == "tool":
            return _tool_result_block(m, raw)
        if kind == "user":
            return _user_blocks(m.content, raw)
        return _assistant_blocks(m, raw)

    return _memo.get(m, (kind, raw), render, lambda: _message_chars(m))


def _flush_user(
    out: list[dict[str, Any]], results: list[dict[str, Any]], folded: list[dict[str, Any]]
) -> bool:
    """Emit pending tool results (and folded system text) before a non-user message;
    True when that replaced the last message already in `out`."""
    if results:
        out.append(_wrappers.wrap("user", results + folded))
    elif folded and out and out[-1]["role"] == "user":  # a copy: out[-1] may be remembered
        out[-1] = {**out[-1], "content": [*out[-1]["content"], *folded]}
        return True
    elif folded:
        out.append({"role": "user", "content": list(folded)})
    return False


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
    if messages:  # the blocks may be the render memo's: marked in copies
        content = messages[-1]["content"]
        for i in range(len(content) - 1, -1, -1):
            if content[i]["type"] not in THINKING_BLOCKS:  # thinking blocks cannot be marked
                marked = [*content[:i], {**content[i], "cache_control": dict(EPHEMERAL)}]
                messages[-1] = {**messages[-1], "content": marked + content[i + 1 :]}
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
        and last["content"][0]["type"] not in THINKING_BLOCKS
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
