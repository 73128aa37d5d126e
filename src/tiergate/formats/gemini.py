"""Gemini generateContent / streamGenerateContent <-> the neutral model (upstream only).

Three gaps to bridge:
- Tool-call ids. Gemini matches a functionResponse to its functionCall by
  name and order and usually sends no id, so ids are synthesised from the
  response id, position, name and arguments: `call_<index>_<hash>`, the same
  for a streamed and a non-streamed answer. Going back, each tool result's id
  is looked up among the earlier calls to recover the function name.
- Thought signatures. Gemini 3 rejects a replayed functionCall without the
  signature it was issued with. The signature rides in a ThinkingPart tagged
  GEMINI_SIGNATURE_PREFIX; history without one (other providers, OpenAI
  clients, which cannot carry it) gets Google's documented skip-validation
  token instead of a 400.
- Schemas. Function parameters use an OpenAPI subset: keys Gemini rejects
  ($schema, additionalProperties, ...) are dropped and $ref is inlined.
"""

from __future__ import annotations

import hashlib
import mimetypes
import uuid
from typing import Any

import orjson

from tiergate.core.model import (
    ChatRequest,
    ChatResponse,
    FinishReason,
    ImagePart,
    Message,
    Part,
    StreamEnd,
    StreamEvent,
    StreamStart,
    TextDelta,
    TextPart,
    ThinkingDelta,
    ThinkingPart,
    ToolCall,
    ToolCallDelta,
    ToolCallStart,
    ToolSpec,
    Usage,
    folded_system_text,
)
from tiergate.formats import GEMINI_SIGNATURE_PREFIX, arguments_object, dumps, is_gemini_signature
from tiergate.formats.errors import FormatError, UpstreamStreamError

# Google's sentinel for function calls whose signature is unknown (history from
# another model); Gemini 3 accepts it in place of a real signature.
SKIP_SIGNATURE = "skip_thought_signature_validator"
MAX_STOP_SEQUENCES = 5

_FINISH_IN: dict[str, FinishReason] = {
    "STOP": "stop",
    "MAX_TOKENS": "length",
    "SAFETY": "content_filter",
    "RECITATION": "content_filter",
    "BLOCKLIST": "content_filter",
    "PROHIBITED_CONTENT": "content_filter",
    "SPII": "content_filter",
    "IMAGE_SAFETY": "content_filter",
    "MALFORMED_FUNCTION_CALL": "error",
    "UNEXPECTED_TOOL_CALL": "error",
    "TOO_MANY_TOOL_CALLS": "error",
}
_TOOL_MODES = {"auto": "AUTO", "required": "ANY", "none": "NONE"}

# The OpenAPI-subset keys Gemini's Schema accepts; anything else is a 400.
_SCHEMA_KEYS = frozenset(
    {
        "type",
        "format",
        "title",
        "description",
        "nullable",
        "enum",
        "maxItems",
        "minItems",
        "properties",
        "required",
        "minProperties",
        "maxProperties",
        "minLength",
        "maxLength",
        "pattern",
        "example",
        "anyOf",
        "propertyOrdering",
        "default",
        "items",
        "minimum",
        "maximum",
    }
)
_FORMATS = {
    "string": frozenset({"enum", "date-time"}),
    "integer": frozenset({"int32", "int64"}),
    "number": frozenset({"float", "double"}),
}


# ---- request ------------------------------------------------------------------


def render_request(req: ChatRequest, upstream_model: str) -> dict[str, Any]:
    """The generateContent body (the model goes in the URL, not the body)."""
    del upstream_model  # part of the URL for Gemini; kept for a uniform codec API
    body: dict[str, Any] = {"contents": _render_contents(req.messages)}
    system = [{"text": p.text} for p in req.system if p.text]
    if system:
        body["systemInstruction"] = {"parts": system}

    tools = [t for t in req.tools if t.native is None]  # provider-defined tools: dropped
    declarations = [_render_tool(t) for t in tools]
    mode = None
    if tools and req.tool_choice is not None:
        mode = _render_tool_choice(req.tool_choice)
    elif not tools and any(m.tool_calls for m in req.messages):
        # Declare the functions the history uses so it stays valid; forbid calling them.
        names = dict.fromkeys(c.name for m in req.messages for c in m.tool_calls)
        declarations = [{"name": n} for n in names]
        mode = {"mode": "NONE"}
    if declarations:
        body["tools"] = [{"functionDeclarations": declarations}]
    if mode is not None:
        body["toolConfig"] = {"functionCallingConfig": mode}

    config: dict[str, Any] = {}
    if req.max_tokens is not None:
        config["maxOutputTokens"] = req.max_tokens
    if req.temperature is not None:
        config["temperature"] = req.temperature
    if req.top_p is not None:
        config["topP"] = req.top_p
    if req.stop:
        config["stopSequences"] = req.stop[:MAX_STOP_SEQUENCES]
    if req.wants_json():
        config["responseMimeType"] = "application/json"
        schema = ((req.response_format or {}).get("json_schema") or {}).get("schema")
        if isinstance(schema, dict):
            config["responseSchema"] = clean_schema(schema)
    thinking = req.thinking or {}
    if thinking.get("type") in ("enabled", "adaptive"):
        thinking_config: dict[str, Any] = {"includeThoughts": True}
        if isinstance(thinking.get("budget_tokens"), int):
            thinking_config["thinkingBudget"] = thinking["budget_tokens"]
        config["thinkingConfig"] = thinking_config
    if config:
        body["generationConfig"] = config
    return body


def _render_contents(messages: list[Message]) -> list[dict[str, Any]]:
    names = {c.id: c.name for m in messages for c in m.tool_calls}
    contents: list[dict[str, Any]] = []
    responses: list[dict[str, Any]] = []
    for m in messages:
        if m.role == "tool":
            name = names.get(m.tool_call_id or "") or m.name
            if not name:
                raise FormatError(
                    f"tool result for unknown tool call id {m.tool_call_id!r}", "messages"
                )
            # Gemini's convention: "output" for a result, "error" for a failure.
            text = "\n".join(p.text for p in m.content if isinstance(p, TextPart) and p.text)
            payload = {"error" if m.is_error else "output": text}
            responses.append({"functionResponse": {"name": name, "response": payload}})
            continue
        if responses:  # all results of one model turn travel in one content
            _append(contents, "user", responses)
            responses = []
        if m.role == "assistant":
            _append(contents, "model", _model_parts(m))
        elif m.role == "system":  # no system role inside contents: marked user text
            if m.text():
                _append(contents, "user", [{"text": folded_system_text(m)}])
        else:
            _append(contents, "user", _user_parts(m.content))
    if responses:
        _append(contents, "user", responses)
    return contents


def _append(contents: list[dict[str, Any]], role: str, parts: list[dict[str, Any]]) -> None:
    """Add a turn, merging into the previous one of the same role (turns must alternate)."""
    if not parts:
        return
    if contents and contents[-1]["role"] == role:
        contents[-1]["parts"].extend(parts)
    else:
        contents.append({"role": role, "parts": parts})


def _user_parts(content: list[Part]) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    for p in content:
        if isinstance(p, TextPart) and p.text:
            parts.append({"text": p.text})
        elif isinstance(p, ImagePart):
            if p.data is not None:
                mime = p.media_type or "image/png"
                parts.append({"inlineData": {"mimeType": mime, "data": p.data}})
            elif p.url:
                mime = mimetypes.guess_type(p.url)[0] or "image/jpeg"
                parts.append({"fileData": {"mimeType": mime, "fileUri": p.url}})
    return parts


def _model_parts(m: Message) -> list[dict[str, Any]]:
    signature = next(
        (
            p.signature.removeprefix(GEMINI_SIGNATURE_PREFIX)
            for p in m.content
            if isinstance(p, ThinkingPart) and p.signature and is_gemini_signature(p.signature)
        ),
        None,
    )
    parts: list[dict[str, Any]] = [
        {"text": p.text} for p in m.content if isinstance(p, TextPart) and p.text
    ]
    calls: list[dict[str, Any]] = [
        {"functionCall": {"name": c.name, "args": arguments_object(c.arguments)}}
        for c in m.tool_calls
    ]
    if calls:
        # Gemini signs the first call of a step; it must come back on that part.
        calls[0]["thoughtSignature"] = signature or SKIP_SIGNATURE
    elif signature and parts:
        parts[-1]["thoughtSignature"] = signature  # text answers carry it on the last part
    return parts + calls


def _render_tool(t: ToolSpec) -> dict[str, Any]:
    declaration: dict[str, Any] = {"name": t.name}
    if t.description:
        declaration["description"] = t.description
    params = clean_schema(t.parameters) if t.parameters else {}
    if params.get("properties"):  # Gemini rejects an OBJECT with no properties
        declaration["parameters"] = params
    return declaration


def _render_tool_choice(choice: str | dict[str, Any]) -> dict[str, Any]:
    if isinstance(choice, dict):
        return {"mode": "ANY", "allowedFunctionNames": [choice["name"]]}
    return {"mode": _TOOL_MODES.get(choice, "AUTO")}


def clean_schema(schema: Any, defs: dict[str, Any] | None = None, depth: int = 0) -> dict[str, Any]:
    """A JSON Schema reduced to the subset Gemini accepts, with $ref inlined."""
    if not isinstance(schema, dict) or depth > 32:
        return {}
    if defs is None:
        defs = {**(schema.get("definitions") or {}), **(schema.get("$defs") or {})}
    ref = schema.get("$ref")
    if isinstance(ref, str):
        target = defs.get(ref.rsplit("/", 1)[-1])
        rest = {k: v for k, v in schema.items() if k != "$ref"}
        return clean_schema({**(target or {}), **rest}, defs, depth + 1)
    out: dict[str, Any] = {}
    kind = schema.get("type")
    if isinstance(kind, list):  # ["string", "null"] -> string, nullable
        kinds = [k for k in kind if k != "null"]
        if len(kinds) < len(kind):
            out["nullable"] = True
        kind = kinds[0] if kinds else None
    if isinstance(kind, str):
        out["type"] = kind
    for key, value in schema.items():
        if key == "properties" and isinstance(value, dict):
            out["properties"] = {k: clean_schema(v, defs, depth + 1) for k, v in value.items()}
        elif key == "items":
            out["items"] = clean_schema(value, defs, depth + 1)
        elif key in ("anyOf", "oneOf") and isinstance(value, list):
            options = [v for v in value if not (isinstance(v, dict) and v.get("type") == "null")]
            if len(options) < len(value):
                out["nullable"] = True
            cleaned = [clean_schema(v, defs, depth + 1) for v in options]
            if len(cleaned) == 1:
                out.update(cleaned[0])
            elif cleaned:
                out["anyOf"] = cleaned
        elif key == "const":
            out["enum"] = [str(value)]
        elif key == "enum" and isinstance(value, list):
            if kind in (None, "string"):
                out["enum"] = [str(v) for v in value if v is not None]
        elif key == "format":
            if value in _FORMATS.get(kind if isinstance(kind, str) else "", ()):
                out["format"] = value
        elif key in _SCHEMA_KEYS and key not in out and key != "type":
            out[key] = value
    if "required" in out:
        props = out.get("properties") or {}
        out["required"] = [r for r in out["required"] if r in props]
        if not out["required"]:
            del out["required"]
    return out


# ---- response -----------------------------------------------------------------


def call_id(response_id: str, index: int, name: str, arguments: str) -> str:
    """A deterministic tool-call id for a Gemini function call that came without one."""
    digest = hashlib.sha256(f"{response_id}\0{index}\0{name}\0{arguments}".encode()).hexdigest()
    return f"call_{index}_{digest[:16]}"


def parse_usage(meta: Any) -> Usage:
    """usageMetadata: the prompt count includes cached tokens; thoughts are billed as output."""
    if not isinstance(meta, dict):
        return Usage()
    return Usage(
        input_tokens=int(meta.get("promptTokenCount") or 0)
        + int(meta.get("toolUsePromptTokenCount") or 0),
        output_tokens=int(meta.get("candidatesTokenCount") or 0)
        + int(meta.get("thoughtsTokenCount") or 0),
        cache_read_tokens=int(meta.get("cachedContentTokenCount") or 0),
    )


def _finish(body: dict[str, Any], has_calls: bool) -> FinishReason | None:
    candidates = body.get("candidates") or ()
    raw = candidates[0].get("finishReason") if candidates else None
    if raw is None:
        blocked = (body.get("promptFeedback") or {}).get("blockReason")
        return "content_filter" if blocked else None
    reason = _FINISH_IN.get(raw, "stop")
    return "tool_calls" if has_calls and reason == "stop" else reason


def _check_error(body: dict[str, Any]) -> None:
    err = body.get("error")
    if isinstance(err, dict):
        raise UpstreamStreamError(str(err.get("message", "upstream error")), err.get("status"))


def parse_response(body: dict[str, Any], model: str) -> ChatResponse:
    """A generateContent response as a neutral response."""
    _check_error(body)
    response_id = str(body.get("responseId") or "")
    candidates = body.get("candidates") or ()
    parts = ((candidates[0].get("content") or {}).get("parts") or ()) if candidates else ()
    thoughts: list[str] = []
    texts: list[str] = []
    calls: list[ToolCall] = []
    signature = None
    for part in parts:
        signature = signature or part.get("thoughtSignature")
        fc = part.get("functionCall")
        if fc is not None:
            calls.append(_tool_call(fc, response_id, len(calls)))
        elif "text" in part:
            (thoughts if part.get("thought") else texts).append(part["text"])
    content: list[Part] = []
    if thoughts or signature:
        tagged = GEMINI_SIGNATURE_PREFIX + signature if signature else None
        content.append(ThinkingPart("".join(thoughts), signature=tagged))
    if texts:
        content.append(TextPart("".join(texts)))
    return ChatResponse(
        id=response_id,
        model=str(body.get("modelVersion") or model),
        content=content,
        tool_calls=calls,
        finish_reason=_finish(body, bool(calls)) or "stop",
        usage=parse_usage(body.get("usageMetadata")),
    )


def _tool_call(fc: dict[str, Any], response_id: str, index: int) -> ToolCall:
    name = str(fc.get("name") or "")
    arguments = dumps(fc.get("args") or {})
    return ToolCall(fc.get("id") or call_id(response_id, index, name, arguments), name, arguments)


class StreamParser:
    """`?alt=sse` chunks (each a partial GenerateContentResponse) -> neutral events.

    Gemini sends function calls whole, so each becomes a ToolCallStart plus
    one ToolCallDelta. There is no end marker: the chunk with finishReason
    carries the final usage, and StreamEnd comes from `finish()`.
    """

    def __init__(self, model: str) -> None:
        self.model = model
        self._started = False
        self._ended = False
        self._signed = False
        self._calls = 0
        self._finish: FinishReason | None = None
        self._usage = Usage()

    def feed(self, data: str) -> list[StreamEvent]:
        if self._ended:
            return []
        chunk = orjson.loads(data)
        if not isinstance(chunk, dict):
            raise ValueError("stream chunk is not an object")
        _check_error(chunk)
        events: list[StreamEvent] = []
        if "usageMetadata" in chunk:
            self._usage = parse_usage(chunk["usageMetadata"])
        response_id = str(chunk.get("responseId") or "")
        if not self._started:
            self._started = True
            events.append(
                StreamStart(
                    id=response_id or f"gemini-{uuid.uuid4().hex}",
                    model=str(chunk.get("modelVersion") or self.model),
                    input_tokens=self._usage.input_tokens,
                )
            )
        candidates = chunk.get("candidates") or ()
        parts = ((candidates[0].get("content") or {}).get("parts") or ()) if candidates else ()
        for part in parts:
            signature = part.get("thoughtSignature")
            if signature and not self._signed:
                # Before the part it signs, so renderers put thinking ahead of the call.
                self._signed = True
                events.append(ThinkingDelta("", GEMINI_SIGNATURE_PREFIX + signature))
            fc = part.get("functionCall")
            if fc is not None:
                call = _tool_call(fc, response_id, self._calls)
                events.append(ToolCallStart(self._calls, call.id, call.name))
                events.append(ToolCallDelta(self._calls, call.arguments))
                self._calls += 1
            elif part.get("text"):
                text = part["text"]
                events.append(ThinkingDelta(text) if part.get("thought") else TextDelta(text))
        finish = _finish(chunk, self._calls > 0)
        if finish is not None:
            self._finish = finish
        return events

    def finish(self) -> list[StreamEvent]:
        """End of body: complete the stream if Gemini said why it stopped, else nothing."""
        if self._ended or not self._started or self._finish is None:
            return []
        self._ended = True
        finish: FinishReason = self._finish
        if self._calls and finish == "stop":
            finish = "tool_calls"
        return [StreamEnd(finish_reason=finish, usage=self._usage)]
