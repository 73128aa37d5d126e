"""Gemini generateContent / streamGenerateContent as the provider sends it.

Request: `POST /v1beta/models/{model}:generateContent` (or
`:streamGenerateContent`, `?alt=sse` for SSE; without it the stream is one JSON
array), key in `x-goog-api-key` or `?key=`. Field names are accepted in both
the camelCase and the snake_case spelling, as the API does.

Implicit caching is reported as `usageMetadata.cachedContentTokenCount`, which
`promptTokenCount` includes. Function calls are whole `functionCall` parts
(never fragmented when streaming); arguments the model cannot produce as JSON
end the candidate with finishReason MALFORMED_FUNCTION_CALL.
"""

from __future__ import annotations

import hashlib
from typing import Any

from starlette.requests import Request

from tiergate.sim.prompt import IMAGE_TOKENS, PromptBlock, SimCall, SimRequestError, ToolDef
from tiergate.sim.responder import Reply
from tiergate.sim.wire import (
    ReplyContext,
    SimUsage,
    StreamEvent,
    canonical_json,
    dumps,
    sse_data,
    token_chunks,
)

FINISH = {"stop": "STOP", "length": "MAX_TOKENS", "tool_calls": "STOP"}
STATUSES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}


def _get(obj: dict[str, Any], camel: str, snake: str) -> Any:
    value = obj.get(camel)
    return obj.get(snake) if value is None else value


def _bad(message: str) -> SimRequestError:
    return SimRequestError(400, message)


class GeminiWire:
    name = "gemini"

    def api_key(self, request: Request) -> str | None:
        return request.headers.get("x-goog-api-key") or request.query_params.get("key") or None

    def parse(self, body: Any, request: Request, path_model: str | None) -> SimCall:
        if not isinstance(body, dict):
            raise _bad("Invalid JSON payload received. Expected an object.")
        model = path_model or ""
        contents = body.get("contents")
        if not isinstance(contents, list) or not contents:
            raise _bad("* GenerateContentRequest.contents: contents is not specified\n")
        tools = _parse_tools(body.get("tools"))
        blocks = [
            PromptBlock(
                "<|tool|>"
                + canonical_json(
                    {"name": t.name, "description": t.description, "parameters": t.schema}
                )
            )
            for t in tools
        ]
        system = _get(body, "systemInstruction", "system_instruction")
        if isinstance(system, dict):
            blocks.append(PromptBlock("<|system|>\n", marker=True))
            blocks.extend(_part_block(p) for p in system.get("parts") or [] if isinstance(p, dict))
        last_kind = _add_contents(blocks, contents)
        config = _get(body, "generationConfig", "generation_config") or {}
        max_tokens = _get(config, "maxOutputTokens", "max_output_tokens")
        if max_tokens is not None and (not isinstance(max_tokens, int) or max_tokens < 1):
            raise _bad(
                "* GenerateContentRequest.generation_config.max_output_tokens: "
                "must be a positive integer\n"
            )
        schema = _get(config, "responseJsonSchema", "response_json_schema") or _get(
            config, "responseSchema", "response_schema"
        )
        return SimCall(
            provider="gemini",
            model=model,
            blocks=blocks,
            tools=tools,
            last_turn=last_kind,
            directive_text=_latest_user_text(contents),
            max_tokens=max_tokens,
            tool_choice=_tool_choice(_get(body, "toolConfig", "tool_config")),
            json_schema=schema if isinstance(schema, dict) else None,
            json_mode=_get(config, "responseMimeType", "response_mime_type") == "application/json",
            extra={"sse": request.query_params.get("alt") == "sse"},
        )

    # -- responses -------------------------------------------------------------

    def render(self, call: SimCall, reply: Reply, usage: SimUsage, ctx: ReplyContext) -> bytes:
        candidate = _final_candidate(reply, with_text=True)
        return dumps(self._envelope(call, ctx, [candidate], usage, usage.output_tokens))

    def stream(
        self, call: SimCall, reply: Reply, usage: SimUsage, ctx: ReplyContext, chunk_tokens: int
    ) -> list[StreamEvent]:
        sse = bool(call.extra.get("sse"))
        chunks: list[tuple[dict[str, Any], int]] = []
        produced = 0
        pieces = token_chunks(reply.text, chunk_tokens) if reply.text else []
        for piece, n in pieces:
            produced += n
            candidate = {"content": {"parts": [{"text": piece}], "role": "model"}, "index": 0}
            chunks.append((self._envelope(call, ctx, [candidate], usage, produced), n))
        # The last chunk carries the finish reason and whatever has not been sent yet.
        final = _final_candidate(reply, with_text=not pieces)
        chunks.append(
            (
                self._envelope(call, ctx, [final], usage, usage.output_tokens),
                usage.output_tokens - produced,
            )
        )
        if sse:
            return [(sse_data(body, crlf=True), n) for body, n in chunks]
        events: list[StreamEvent] = []
        for i, (body, n) in enumerate(chunks):
            events.append(((b"[" if i == 0 else b",\r\n") + dumps(body), n))
        events.append((b"]", 0))
        return events

    def _envelope(
        self,
        call: SimCall,
        ctx: ReplyContext,
        candidates: list[dict[str, Any]],
        usage: SimUsage,
        output_tokens: int,
    ) -> dict[str, Any]:
        meta: dict[str, Any] = {
            "promptTokenCount": usage.prompt_tokens,
            "candidatesTokenCount": output_tokens,
            "totalTokenCount": usage.prompt_tokens + output_tokens,
            "promptTokensDetails": [{"modality": "TEXT", "tokenCount": usage.prompt_tokens}],
        }
        if usage.cache_read:
            meta["cachedContentTokenCount"] = usage.cache_read
            meta["cacheTokensDetails"] = [{"modality": "TEXT", "tokenCount": usage.cache_read}]
        return {
            "candidates": candidates,
            "usageMetadata": meta,
            "modelVersion": call.model,
            "responseId": ctx.request_id,
        }

    def error(self, status: int, message: str, code: str | None = None) -> bytes:
        state = STATUSES.get(status, "INTERNAL" if status >= 500 else "INVALID_ARGUMENT")
        return dumps({"error": {"code": status, "message": message, "status": state}})

    def broken_event(self) -> bytes:
        return b'data: {"candidates": [{"content": {"parts": [{"text": \r\n\r\n'

    def stream_error(self, call: SimCall, status: int, message: str) -> list[bytes]:
        if call.extra.get("sse"):
            return [b"data: " + self.error(status, message) + b"\r\n\r\n"]
        return [b",\r\n" + self.error(status, message), b"]"]

    def stream_media_type(self, call: SimCall) -> str:
        return "text/event-stream" if call.extra.get("sse") else "application/json; charset=UTF-8"


def _final_candidate(reply: Reply, *, with_text: bool) -> dict[str, Any]:
    if any(tc.input is None for tc in reply.tool_calls) and reply.finish != "length":
        return {"finishReason": "MALFORMED_FUNCTION_CALL", "index": 0}
    parts: list[dict[str, Any]] = []
    if with_text and (reply.text or not reply.tool_calls):
        parts.append({"text": reply.text})
    parts += [
        {"functionCall": {"name": tc.name, "args": tc.input or {}}} for tc in reply.tool_calls
    ]
    return {
        "content": {"parts": parts or [{"text": ""}], "role": "model"},
        "finishReason": FINISH[reply.finish],
        "index": 0,
    }


def _parse_tools(raw: Any) -> list[ToolDef]:
    tools: list[ToolDef] = []
    if raw is None:
        return tools
    if not isinstance(raw, list):
        raise _bad("* GenerateContentRequest.tools: must be a list\n")
    for entry in raw:
        if not isinstance(entry, dict):
            continue
        for decl in _get(entry, "functionDeclarations", "function_declarations") or []:
            if not isinstance(decl, dict) or not isinstance(decl.get("name"), str):
                raise _bad(
                    "* GenerateContentRequest.tools[0].function_declarations[0].name: "
                    "Invalid function name.\n"
                )
            schema = _get(decl, "parametersJsonSchema", "parameters_json_schema")
            if schema is None:
                schema = decl.get("parameters") or {}
            tools.append(ToolDef(decl["name"], str(decl.get("description") or ""), schema))
    return tools


def _part_block(part: dict[str, Any]) -> PromptBlock:
    if "text" in part:
        return PromptBlock(str(part["text"]))
    call = _get(part, "functionCall", "function_call")
    if isinstance(call, dict):
        return PromptBlock(
            f"<|tool_call|>{call.get('name', '')}\n{canonical_json(call.get('args', {}))}"
        )
    response = _get(part, "functionResponse", "function_response")
    if isinstance(response, dict):
        return PromptBlock(
            f"<|tool_result|>{response.get('name', '')}\n"
            f"{canonical_json(response.get('response', {}))}"
        )
    ident = hashlib.blake2b(canonical_json(part).encode(), digest_size=8).hexdigest()
    return PromptBlock(f"<|media:{ident}|>", opaque_tokens=IMAGE_TOKENS)


def _add_contents(blocks: list[PromptBlock], contents: list[Any]) -> Any:
    """Append the turns' blocks; returns the kind of the last turn."""
    pending_calls = 0
    kind = "user"
    for i, content in enumerate(contents):
        if not isinstance(content, dict):
            raise _bad(f"* GenerateContentRequest.contents[{i}]: must be an object\n")
        role = content.get("role") or "user"
        if role == "function":  # the older spelling of a function-response turn
            role = "user"
        if role not in ("user", "model"):
            raise _bad("Please use a valid role: user, model.")
        parts = [p for p in content.get("parts") or [] if isinstance(p, dict)]
        if not parts:
            raise _bad(
                f"* GenerateContentRequest.contents[{i}].parts: contents.parts must not be empty.\n"
            )
        responses = sum(1 for p in parts if _get(p, "functionResponse", "function_response"))
        if pending_calls and responses != pending_calls:
            raise _bad(
                "Please ensure that the number of function response parts is equal to "
                "the number of function call parts of the function call turn."
            )
        pending_calls = 0
        if role == "model":
            pending_calls = sum(1 for p in parts if _get(p, "functionCall", "function_call"))
        blocks.append(PromptBlock(f"<|{role}|>\n", marker=True))
        blocks.extend(_part_block(p) for p in parts)
        kind = "assistant" if role == "model" else "tool_result" if responses else "user"
    return kind


def _latest_user_text(contents: list[Any]) -> str:
    for content in reversed(contents):
        if (content.get("role") or "user") != "user":
            continue
        text = "".join(
            str(p.get("text", ""))
            for p in content.get("parts") or []
            if isinstance(p, dict) and "text" in p
        )
        if text:
            return text
    return ""


def _tool_choice(config: Any) -> str:
    if not isinstance(config, dict):
        return "auto"
    calling = _get(config, "functionCallingConfig", "function_calling_config") or {}
    mode = str(calling.get("mode", "AUTO")).upper()
    if mode == "NONE":
        return "none"
    if mode in ("ANY", "VALIDATED"):
        names = _get(calling, "allowedFunctionNames", "allowed_function_names") or []
        return str(names[0]) if len(names) == 1 else "required"
    return "auto"
