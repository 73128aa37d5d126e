"""The provider simulator as one ASGI app: every provider format on one port.

  POST /v1/chat/completions                      OpenAI (and DeepSeek models)
  POST /v1/embeddings                            OpenAI embeddings (embeddings.py)
  GET  /v1/models                                OpenAI list (Anthropic list with x-api-key)
  POST /v1/messages, /v1/messages/count_tokens   Anthropic
  POST /v1beta/models/{model}:generateContent    Gemini
  POST /v1beta/models/{model}:streamGenerateContent[?alt=sse]
  POST /v1beta/models/{model}:countTokens, GET /v1beta/models
  /_sim/...                                      test controls (control.py)

`/chat/completions` and `/models` answer too, for clients whose base URL has
no `/v1` (DeepSeek's SDK examples).
"""

from __future__ import annotations

from typing import Any

import orjson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tiergate.sim.anthropic_wire import AnthropicWire
from tiergate.sim.control import control_routes
from tiergate.sim.embeddings import EMBEDDING_MODELS, serve_embeddings
from tiergate.sim.gemini_wire import GeminiWire
from tiergate.sim.handler import MISSING_KEY, error_response, read_call, serve
from tiergate.sim.openai_wire import OpenAIWire
from tiergate.sim.prompt import SimCall, index_prompt
from tiergate.sim.settings import SimSettings
from tiergate.sim.state import SimState

__all__ = ["SimSettings", "SimState", "create_sim_app"]

OPENAI_MODELS = (
    "gpt-5",
    "gpt-5-mini",
    "gpt-5-nano",
    "gpt-4.1",
    "gpt-4o",
    "gpt-4o-mini",
    "deepseek-chat",
    "deepseek-reasoner",
)
ANTHROPIC_MODELS = (
    "claude-opus-4-6",
    "claude-sonnet-4-6",
    "claude-haiku-4-5",
    "claude-opus-4-1",
    "claude-sonnet-4-5",
)
GEMINI_MODELS = ("gemini-2.5-pro", "gemini-2.5-flash", "gemini-2.5-flash-lite")
CREATED = 1_754_000_000


def _json(value: object) -> Response:
    return Response(orjson.dumps(value), media_type="application/json")


def create_sim_app(settings: SimSettings | None = None) -> Starlette:
    """A fresh simulator; its state is reachable as `app.state.sim` (a SimState)."""
    state = SimState(settings or SimSettings())
    openai_wire = OpenAIWire()
    anthropic_wire = AnthropicWire(require_version=state.settings.require_anthropic_version)
    gemini_wire = GeminiWire()

    async def chat_completions(request: Request) -> Response:
        return await serve(state, openai_wire, request)

    async def embeddings(request: Request) -> Response:
        return await serve_embeddings(state, openai_wire, request)

    async def messages(request: Request) -> Response:
        return await serve(state, anthropic_wire, request)

    async def count_tokens(request: Request) -> Response:
        parsed = await read_call(_CountTokensWire(anthropic_wire), request)
        if isinstance(parsed, Response):
            return parsed
        _, call = parsed
        return _json({"input_tokens": index_prompt(call.blocks, call.model).total})

    async def gemini(request: Request) -> Response:
        model, _, method = request.path_params["target"].rpartition(":")
        if method in ("generateContent", "streamGenerateContent"):
            return await serve(
                state, gemini_wire, request, model, stream=method == "streamGenerateContent"
            )
        if method == "countTokens":
            parsed = await read_call(gemini_wire, request, model)
            if isinstance(parsed, Response):
                return parsed
            total = index_prompt(parsed[1].blocks, model).total
            return _json(
                {
                    "totalTokens": total,
                    "promptTokensDetails": [{"modality": "TEXT", "tokenCount": total}],
                }
            )
        return error_response(gemini_wire, 404, f"Method not found: {method or request.url.path}")

    async def models(request: Request) -> Response:
        if request.headers.get("anthropic-version") or request.headers.get("x-api-key"):
            if not anthropic_wire.api_key(request):
                return error_response(anthropic_wire, 401, MISSING_KEY["anthropic"])
            data = [
                {"type": "model", "id": m, "display_name": m, "created_at": "2025-08-01T00:00:00Z"}
                for m in ANTHROPIC_MODELS
            ]
            return _json(
                {
                    "data": data,
                    "has_more": False,
                    "first_id": data[0]["id"],
                    "last_id": data[-1]["id"],
                }
            )
        if not openai_wire.api_key(request):
            return error_response(openai_wire, 401, MISSING_KEY["openai"])
        return _json(
            {
                "object": "list",
                "data": [
                    {"id": m, "object": "model", "created": CREATED, "owned_by": "tiergate-sim"}
                    for m in (*OPENAI_MODELS, *EMBEDDING_MODELS)
                ],
            }
        )

    async def gemini_models(request: Request) -> Response:
        if not gemini_wire.api_key(request):
            return error_response(gemini_wire, 401, MISSING_KEY["gemini"])
        return _json(
            {
                "models": [
                    {
                        "name": f"models/{m}",
                        "displayName": m,
                        "supportedGenerationMethods": ["generateContent", "countTokens"],
                    }
                    for m in GEMINI_MODELS
                ]
            }
        )

    routes = [
        Route("/v1/chat/completions", chat_completions, methods=["POST"]),
        Route("/chat/completions", chat_completions, methods=["POST"]),
        Route("/v1/embeddings", embeddings, methods=["POST"]),
        Route("/embeddings", embeddings, methods=["POST"]),
        Route("/v1/models", models, methods=["GET"]),
        Route("/models", models, methods=["GET"]),
        Route("/v1/messages", messages, methods=["POST"]),
        Route("/v1/messages/count_tokens", count_tokens, methods=["POST"]),
        Route("/v1beta/models", gemini_models, methods=["GET"]),
        Route("/v1beta/models/{target:path}", gemini, methods=["POST"]),
        *control_routes(state),
    ]
    app = Starlette(routes=routes)
    app.state.sim = state
    return app


class _CountTokensWire(AnthropicWire):
    """count_tokens takes a Messages body without `max_tokens`."""

    def __init__(self, inner: AnthropicWire) -> None:
        super().__init__(require_version=inner.require_version)

    def parse(self, body: Any, request: Request, path_model: str | None) -> SimCall:
        if isinstance(body, dict) and "max_tokens" not in body:
            body = {**body, "max_tokens": 1}
        return super().parse(body, request, path_model)
