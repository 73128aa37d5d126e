"""A neutral reply as the client's Response object (`"object": "response"`)."""

from __future__ import annotations

from typing import Any

from tiergate.core.model import ChatRequest, ChatResponse, ThinkingPart
from tiergate.formats.responses.items import (
    ITEM_PREFIX,
    envelope,
    final_status,
    message_item,
    new_id,
    now,
    reasoning_item,
)
from tiergate.formats.responses.tools import FUNCTION, ToolRoute, call_item


def render_response(resp: ChatResponse, req: ChatRequest) -> dict[str, Any]:
    """The Response object for a whole (non-streamed) reply."""
    routes: dict[str, ToolRoute] = req.extra.get("tool_routes", {})
    output: list[dict[str, Any]] = []
    thinking = [p for p in resp.content if isinstance(p, ThinkingPart) and not p.redacted]
    if thinking:
        text = "".join(p.text for p in thinking)
        signature = next((p.signature for p in thinking if p.signature), None)
        output.append(reasoning_item(new_id("rs"), text, signature))
    text = resp.text()
    if text or not resp.tool_calls:
        output.append(message_item(new_id("msg"), text, "completed"))
    for call in resp.tool_calls:
        route = routes.get(call.name, FUNCTION)
        output.append(call_item(call, route, new_id(ITEM_PREFIX[route.kind]), "completed"))
    status, incomplete, error = final_status(resp.finish_reason)
    return envelope(
        new_id("resp"),
        resp.created or now(),
        req,
        status,
        output,
        resp.usage,
        incomplete=incomplete,
        error=error,
    )
