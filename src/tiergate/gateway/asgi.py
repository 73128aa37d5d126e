"""The completion endpoints, served straight from ASGI.

A request's coroutine chain is resumed through every layer at every await
(reading the body, waiting for the upstream). Starlette's router, its two
exception middlewares and the per-route wrappers are about eight frames, and
several closures and Request objects per request, spent routing four fixed
paths. `GatewayApp` sends POSTs to those paths to the pipeline directly;
everything else (admin API, dashboard, metrics, models, lifespan) goes
through Starlette as before. An unexpected error still becomes a 500 in the
client's own error format, as the app's exception handler does.
"""

from __future__ import annotations

import logging

from starlette.applications import Starlette
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from tiergate import metrics, tracing
from tiergate.gateway.errors import GatewayError
from tiergate.gateway.inbound import ANTHROPIC, OPENAI, RESPONSES, InboundFormat
from tiergate.gateway.pipeline import Gateway
from tiergate.gateway.request_headers import CompletionRequest

log = logging.getLogger("tiergate.app")

COMPLETION_PATHS: dict[str, InboundFormat] = {
    "/v1/chat/completions": OPENAI,
    "/chat/completions": OPENAI,
    "/v1/messages": ANTHROPIC,
    "/v1/responses": RESPONSES,
}


class GatewayApp(Starlette):
    """Starlette, with the completion endpoints taken before its routing."""

    gateway: Gateway | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.gateway is not None and scope["type"] == "http" and scope["method"] == "POST":
            path = scope["path"]
            root = scope.get("root_path", "")
            if root and path.startswith(root):
                path = path[len(root) :]
            fmt = COMPLETION_PATHS.get(path)
            if fmt is not None:
                scope["app"] = self
                await self._complete(self.gateway, fmt, scope, receive, send)
                return
        await super().__call__(scope, receive, send)

    async def _complete(
        self, gateway: Gateway, fmt: InboundFormat, scope: Scope, receive: Receive, send: Send
    ) -> None:
        metrics.REQUESTS_IN_FLIGHT.inc()
        try:
            tracer = tracing.tracer
            if tracer is None:
                await self._answer(gateway, fmt, scope, receive, send)
                return
            from opentelemetry.trace import SpanKind

            attributes = {"http.request.method": "POST", "http.route": scope["path"]}
            parent = tracing.incoming_context(scope["headers"])  # the caller's traceparent
            with tracer.start_as_current_span(
                "tiergate.request", context=parent, kind=SpanKind.SERVER, attributes=attributes
            ) as span:
                response = await self._answer(gateway, fmt, scope, receive, send)
                span.set_attribute("http.response.status_code", response.status_code)
                for header in ("x-orca-request-id", "x-orca-router", "x-orca-resolved-model"):
                    value = response.headers.get(header)
                    if value is not None:
                        span.set_attribute("tiergate." + header[7:].replace("-", "_"), value)
                if response.status_code >= 500:
                    from opentelemetry.trace import Status, StatusCode

                    span.set_status(Status(StatusCode.ERROR))
        finally:
            metrics.REQUESTS_IN_FLIGHT.dec()

    async def _answer(
        self, gateway: Gateway, fmt: InboundFormat, scope: Scope, receive: Receive, send: Send
    ) -> Response:
        """Handle and send the reply (a stream: until its last byte); the response."""
        try:
            response = await gateway.handle(fmt, CompletionRequest(scope, receive, send))
        except Exception as exc:  # noqa: BLE001 - the pipeline answers its own errors: a bug
            log.error("unhandled error", extra={"error": type(exc).__name__})
            error = GatewayError(500, "Internal gateway error", None)
            response = gateway.error_response(fmt, error, {})
        await response(scope, receive, send)
        return response
