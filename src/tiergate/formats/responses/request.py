"""Responses API requests (`POST /v1/responses`) as neutral chat requests.

The input is a list of items. Items the assistant produced (reasoning,
assistant messages, function/custom/shell calls) that follow one another form
one assistant message; a user message or a tool output ends it. System and
developer messages before the conversation join the system prompt; later ones
stay in place as system messages, as in chat completions.

Refused with a 400 because they need state tiergate does not keep (it stores no
responses, and `store: false` is what Codex sends): `previous_response_id`,
`conversation`, `background: true`, `prompt` (a stored prompt template),
`item_reference` items, file inputs and audio. Everything else is served or
dropped on purpose; docs/conversion.md has the table.
"""

from __future__ import annotations

from typing import Any

from tiergate.core.model import (
    ChatRequest,
    ImagePart,
    Message,
    Part,
    TextPart,
    ThinkingPart,
    ToolSpec,
)
from tiergate.formats import (
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
from tiergate.formats.message_memo import MessageMemo, Parsed, Reuse, parse_messages
from tiergate.formats.openai.request import image_from_url
from tiergate.formats.responses.items import decode_reasoning
from tiergate.formats.responses.tools import (
    ToolRoute,
    call_from_item,
    parse_tool_choice,
    parse_tools,
)

_CALL_ITEMS = frozenset({"function_call", "custom_tool_call", "local_shell_call"})
_OUTPUT_ITEMS = frozenset(
    {"function_call_output", "custom_tool_call_output", "local_shell_call_output"}
)
#: Fields that need a stored response, conversation or prompt, with why they are refused.
_STATEFUL = {
    "previous_response_id": "previous_response_id is not supported: tiergate stores no "
    "responses; send the whole conversation in `input` (store=false)",
    "conversation": "conversation is not supported: tiergate stores no conversations; "
    "send the whole conversation in `input`",
    "prompt": "stored prompt templates are not supported; send instructions and input",
}


#: The memo slot namespace of this codec's parses.
MEMO_FORMAT = "responses"


def parse_request(
    body: dict[str, Any],
    memo: MessageMemo | None = None,
    size: int = 0,
    reuse: Reuse | None = None,
) -> ChatRequest:
    """A client's Responses body as a neutral request; FormatError if it cannot be served.

    With a `memo` (formats/message_memo.py), the input items this conversation's
    previous request already had are taken from its parse, cut back to the last
    item that starts a message of its own (`reusable_count`): assistant items fold
    into the assistant message before them, so a message is final only once a
    user message, system message or tool output follows it."""
    body = expect_dict(body, "body")
    model = expect_str(body.get("model"), "model")
    for name, reason in _STATEFUL.items():
        if body.get(name) is not None:
            raise FormatError(reason, name)
    if opt_bool(body.get("background"), "background"):
        raise FormatError("background responses are not supported", "background")

    system = _instructions(body.get("instructions"))
    messages: list[Message] = []
    remember: tuple[list[Any], Parsed, Reuse | None] | None = None
    raw_input = body.get("input")
    if isinstance(raw_input, str):
        messages.append(Message("user", [TextPart(raw_input)]))
    else:
        items = expect_list(raw_input, "input")
        if reuse is None and memo is not None:
            reuse = memo.match(MEMO_FORMAT, items)
        matched = reuse  # the slot this request continues, even if cut back to nothing
        if reuse is not None:
            reuse = reuse.upto(reusable_count(items, reuse.count))
        parsed = parse_messages(items, memo, reuse, _parse_item, system, messages, field="input")
        if parsed is not None:
            remember = (items, parsed, matched)
    if not messages:
        raise FormatError("input has no message for the model to answer", "input")

    tools, routes, accepted = _tools(body.get("tools"), memo, size)
    tool_choice, tools = parse_tool_choice(body.get("tool_choice"), tools)
    text = opt_dict(body.get("text"), "text")
    reasoning = opt_dict(body.get("reasoning"), "reasoning")
    # Validated so a malformed value is a 400 as at OpenAI, then dropped (see module doc).
    opt_bool(body.get("store"), "store")
    _string_list(body.get("include"), "include")
    stream = bool(opt_bool(body.get("stream"), "stream"))
    req = ChatRequest(
        model=model,
        messages=messages,
        system=system,
        tools=tools,
        tool_choice=tool_choice,
        parallel_tool_calls=opt_bool(body.get("parallel_tool_calls"), "parallel_tool_calls"),
        stream=stream,
        include_usage=stream,  # response.completed always carries usage
        max_tokens=opt_int(body.get("max_output_tokens"), "max_output_tokens", 1),
        temperature=opt_number(body.get("temperature"), "temperature", 0.0, 2.0),
        top_p=opt_number(body.get("top_p"), "top_p", 0.0, 1.0),
        response_format=_response_format(text),
        metadata=opt_dict(body.get("metadata"), "metadata") or {},
        user=opt_str(body.get("user"), "user"),
        prompt_cache_key=opt_str(body.get("prompt_cache_key"), "prompt_cache_key"),
        # Never forwarded (no upstream speaks this format): what the reply renders from.
        extra={
            "tool_routes": routes,
            "echo": {
                "instructions": body.get("instructions"),
                "reasoning": reasoning,
                "text": text,
                "tool_choice": body.get("tool_choice"),
                "tools": accepted,
            },
        },
        source_format="responses",
    )
    if memo is not None and remember is not None:  # only a body that parsed whole
        memo.store(MEMO_FORMAT, remember[0], remember[1], size, remember[2])
    return req


def _starts_message(raw: Any) -> bool:
    """Whether an input item appends a message of its own, so no later item can
    change the messages before it (see parse_request)."""
    if not isinstance(raw, dict):
        return False
    kind = raw.get("type")
    if kind in _OUTPUT_ITEMS:
        return True
    if kind is None or kind == "message":
        return raw.get("role") in ("user", "system", "developer")
    return False


def reusable_count(items: list[Any], shared: int) -> int:
    """How many of the `shared` leading items may be taken from the previous parse:
    up to (not including) the last one before `shared` that starts a message of its
    own. Items from there on are parsed again, so nothing folds into a remembered
    message; in the previous parse, too, nothing after that item changed them."""
    for i in range(min(shared, len(items)) - 1, 0, -1):
        if _starts_message(items[i]):
            return i
    return 0


def _instructions(raw: Any) -> list[TextPart]:
    if raw is None:
        return []
    if isinstance(raw, str):
        return [TextPart(raw)] if raw else []
    # the Response object's own `instructions` may be a list of input items
    system: list[TextPart] = []
    for i, item in enumerate(expect_list(raw, "instructions")):
        m = expect_dict(item, f"instructions[{i}]")
        system.extend(_text_parts(m.get("content"), f"instructions[{i}].content"))
    return system


def _parse_item(raw: Any, path: str, system: list[TextPart], out: list[Message]) -> None:
    item = expect_dict(raw, path)
    kind = item.get("type")
    if kind is None:
        if "role" not in item:
            raise FormatError("an input item needs a type (or a role)", f"{path}.type")
        kind = "message"  # an EasyInputMessage: role and content, no type
    expect_str(kind, f"{path}.type")
    if kind == "message":
        _parse_message(item, path, system, out)
    elif kind in _CALL_ITEMS:
        _assistant(out).tool_calls.append(call_from_item(item, path))
    elif kind == "reasoning":
        thinking = _reasoning(item, path)
        if thinking is not None:
            _assistant(out).content.append(thinking)
    elif kind in _OUTPUT_ITEMS:
        call_id = opt_str(item.get("call_id"), f"{path}.call_id")
        if call_id is None and kind == "local_shell_call_output":
            call_id = item.get("id")  # this item names its call by `id`
        out.append(
            Message(
                "tool",
                _tool_output(item.get("output"), f"{path}.output"),
                tool_call_id=expect_str(call_id, f"{path}.call_id"),
            )
        )
    elif kind == "item_reference":
        raise FormatError("item references need stored items, which tiergate does not keep", path)
    # Anything else records a hosted tool's work (web_search_call, file_search_call,
    # computer_call, mcp_call, ...), OpenAI-only state (compaction) or a newer item
    # type: dropped, as the tools that made them are.


def _parse_message(
    item: dict[str, Any], path: str, system: list[TextPart], out: list[Message]
) -> None:
    role = item.get("role")
    content = item.get("content")
    if content is None:
        raise FormatError("a message needs content", f"{path}.content")
    if role in ("system", "developer"):
        texts: list[Part] = [p for p in _text_parts(content, f"{path}.content") if p.text]
        if out:  # inside the conversation: kept in place, as in chat completions
            out.append(Message("system", texts))
        else:  # before it: the system prompt
            system.extend(p for p in texts if isinstance(p, TextPart))
    elif role == "user":
        out.append(Message("user", _user_parts(content, f"{path}.content")))
    elif role == "assistant":
        parts = [p for p in _text_parts(content, f"{path}.content") if p.text]
        _assistant(out).content.extend(parts)
    else:
        raise FormatError(f"unsupported role {role!r}", f"{path}.role")


def _assistant(out: list[Message]) -> Message:
    """The assistant message the current run of assistant items belongs to."""
    if out and out[-1].role == "assistant":
        return out[-1]
    msg = Message("assistant")
    out.append(msg)
    return msg


def _reasoning(item: dict[str, Any], path: str) -> ThinkingPart | None:
    """Thinking the upstream can be given back: only what tiergate itself minted, or
    plain reasoning text. Summaries are not the reasoning; OpenAI's encrypted
    content only OpenAI can read."""
    token = opt_str(item.get("encrypted_content"), f"{path}.encrypted_content")
    if token:
        minted = decode_reasoning(token)
        if minted is not None:
            return minted
    content = item.get("content")
    if content is None:
        return None
    listed = enumerate(expect_list(content, f"{path}.content"))
    parts = [expect_dict(c, f"{path}.content[{i}]") for i, c in listed]
    text = "".join(str(c.get("text", "")) for c in parts if c.get("type") == "reasoning_text")
    return ThinkingPart(text) if text else None


def _text_parts(content: Any, path: str) -> list[TextPart]:
    if content is None:
        return []
    if isinstance(content, str):
        return [TextPart(content)]
    parts: list[TextPart] = []
    for j, raw in enumerate(expect_list(content, path)):
        p = expect_dict(raw, f"{path}[{j}]")
        kind = p.get("type")
        if kind in ("input_text", "output_text", "text"):
            parts.append(TextPart(expect_str(p.get("text"), f"{path}[{j}].text")))
        elif kind == "refusal":
            parts.append(TextPart(expect_str(p.get("refusal"), f"{path}[{j}].refusal")))
        else:
            raise FormatError(f"only text parts are allowed here, got {kind!r}", f"{path}[{j}]")
    return parts


def _user_parts(content: Any, path: str) -> list[Part]:
    if isinstance(content, str):
        return [TextPart(content)]
    parts: list[Part] = []
    for j, raw in enumerate(expect_list(content, path)):
        ppath = f"{path}[{j}]"
        p = expect_dict(raw, ppath)
        kind = p.get("type")
        if kind in ("input_text", "output_text", "text"):
            parts.append(TextPart(expect_str(p.get("text"), f"{ppath}.text")))
        elif kind == "input_image":
            parts.append(_image(p, ppath))
        elif kind in ("input_file", "input_audio"):
            raise FormatError(f"{kind} parts are not supported; send text or images", ppath)
        else:
            raise FormatError(f"unsupported content part {kind!r}", f"{ppath}.type")
    return parts


def _image(p: dict[str, Any], path: str) -> ImagePart:
    url = p.get("image_url")
    if url is None:
        raise FormatError("images need image_url (file_id needs OpenAI's file store)", path)
    return image_from_url(expect_str(url, f"{path}.image_url"), path)


def _tool_output(raw: Any, path: str) -> list[Part]:
    """A tool's output: a string, or input_text/input_image parts (Codex, MCP tools)."""
    if isinstance(raw, str):
        return [TextPart(raw)]
    if isinstance(raw, dict) and isinstance(raw.get("content"), str):
        return [TextPart(raw["content"])]  # an older client shape: {content, success}
    parts: list[Part] = []
    for j, item in enumerate(expect_list(raw, path)):
        p = expect_dict(item, f"{path}[{j}]")
        if p.get("type") == "input_image":
            parts.append(_image(p, f"{path}[{j}]"))
        elif p.get("type") in ("input_text", "output_text", "text"):
            parts.append(TextPart(expect_str(p.get("text"), f"{path}[{j}].text")))
        else:
            raise FormatError(f"unsupported tool output part {p.get('type')!r}", f"{path}[{j}]")
    return parts


def _response_format(text: dict[str, Any] | None) -> dict[str, Any] | None:
    """`text.format` as a chat-completions response_format; `text.verbosity` is dropped."""
    fmt = opt_dict((text or {}).get("format"), "text.format")
    if fmt is None:
        return None
    kind = fmt.get("type")
    if kind == "text":
        return None
    if kind == "json_object":
        return {"type": "json_object"}
    if kind == "json_schema":
        schema: dict[str, Any] = {
            "name": expect_str(fmt.get("name"), "text.format.name"),
            "schema": expect_dict(fmt.get("schema"), "text.format.schema"),
        }
        strict = opt_bool(fmt.get("strict"), "text.format.strict")
        if strict is not None:
            schema["strict"] = strict
        description = opt_str(fmt.get("description"), "text.format.description")
        if description:
            schema["description"] = description
        return {"type": "json_schema", "json_schema": schema}
    raise FormatError("type must be text, json_object or json_schema", "text.format.type")


def _string_list(raw: Any, path: str) -> list[str]:
    if raw is None:
        return []
    return [expect_str(v, f"{path}[{i}]") for i, v in enumerate(expect_list(raw, path))]


def _tools(
    raw: Any, memo: MessageMemo | None, size: int
) -> tuple[list[ToolSpec], dict[str, ToolRoute], list[dict[str, Any]]]:
    """`parse_tools`, or with a memo the parse this very list had in an earlier
    request of the conversation (formats/member_memo.py), in copies the request owns."""
    if memo is None or raw is None:
        return parse_tools(raw)
    specs, routes, accepted = memo.members.parsed(
        "responses.tools", raw, size, lambda: parse_tools(raw)
    )
    return list(specs), dict(routes), list(accepted)
