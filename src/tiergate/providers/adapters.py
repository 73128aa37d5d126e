"""Upstream adapters: OpenAI (and DeepSeek, any OpenAI-compatible URL),
Anthropic Messages, and Gemini generateContent.

Each adapter is a thin pairing of a codec from tiergate.formats with the shared
HTTP client: build URL and auth headers, render the neutral request, parse the
reply (or the SSE stream) back into neutral objects.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import tiergate.formats.anthropic as anthropic_fmt
import tiergate.formats.gemini as gemini_fmt
import tiergate.formats.openai as openai_fmt
from tiergate.core.model import ChatRequest, ChatResponse, StreamEvent
from tiergate.core.upstream import Target
from tiergate.formats.errors import UpstreamStreamError
from tiergate.formats.sse import SSEDecoder, SSEMessage
from tiergate.providers.base import Provider, UpstreamError
from tiergate.providers.http import UpstreamHTTP

ANTHROPIC_VERSION = "2023-06-01"


def _malformed(err: Exception) -> UpstreamError:
    return UpstreamError("malformed", 200, f"upstream reply not understood ({type(err).__name__})")


async def _sse_events(
    chunks: AsyncIterator[bytes],
    feed: Callable[[SSEMessage], list[StreamEvent]],
    finish: Callable[[], list[StreamEvent]],
) -> AsyncIterator[StreamEvent]:
    """Decode an SSE body and run each message through a codec's stream parser.

    An error event inside the stream becomes a 'stream_cut' (never retried once
    bytes reached the client); anything unparseable is a malformed upstream.
    """
    decoder = SSEDecoder()

    def parse(messages: list[SSEMessage]) -> list[StreamEvent]:
        out: list[StreamEvent] = []
        try:
            for msg in messages:
                out.extend(feed(msg))
        except UpstreamStreamError as err:
            raise UpstreamError("stream_cut", 200, str(err)[:200]) from None
        except Exception as err:  # noqa: BLE001 - any parse failure is a malformed upstream
            raise _malformed(err) from None
        return out

    async for chunk in chunks:
        for ev in parse(decoder.feed(chunk)):
            yield ev
    for ev in parse(decoder.finish()):
        yield ev
    for ev in finish():
        yield ev


class OpenAIProvider:
    """OpenAI chat completions; also DeepSeek and OpenAI-compatible servers."""

    def __init__(self, http: UpstreamHTTP) -> None:
        self.http = http

    def _call(self, req: ChatRequest, t: Target) -> tuple[str, dict[str, Any], dict[str, str]]:
        body = openai_fmt.render_request(
            req, t.upstream_model, deepseek=t.channel.config.type == "deepseek"
        )
        url = f"{t.channel.config.resolved_base_url()}/chat/completions"
        headers = {"authorization": f"Bearer {t.api_key}", "content-type": "application/json"}
        return url, body, headers

    async def complete(self, req: ChatRequest, target: Target) -> ChatResponse:
        url, body, headers = self._call(req, target)
        raw = await self.http.post_json(url, body, headers)
        try:
            return openai_fmt.parse_response(raw)
        except Exception as err:  # noqa: BLE001 - any parse failure is a malformed upstream
            raise _malformed(err) from None

    async def embed(self, body: dict[str, Any], t: Target) -> dict[str, Any]:
        """POST /embeddings with the client's body, for the channel's model name."""
        url = f"{t.channel.config.resolved_base_url()}/embeddings"
        headers = {"authorization": f"Bearer {t.api_key}", "content-type": "application/json"}
        return await self.http.post_json(url, {**body, "model": t.upstream_model}, headers)

    async def stream(self, req: ChatRequest, target: Target) -> AsyncIterator[StreamEvent]:
        url, body, headers = self._call(req, target)
        chunks = await self.http.post_stream(url, body, headers)
        parser = openai_fmt.StreamParser()
        async for ev in _sse_events(chunks, lambda m: parser.feed(m.data), parser.finish):
            yield ev


class AnthropicProvider:
    """Anthropic Messages API."""

    def __init__(self, http: UpstreamHTTP) -> None:
        self.http = http

    def _call(self, req: ChatRequest, t: Target) -> tuple[str, dict[str, Any], dict[str, str]]:
        body = anthropic_fmt.render_request(req, t.upstream_model)
        url = f"{t.channel.config.resolved_base_url()}/v1/messages"
        if req.beta_query:
            url += "?beta=true"
        headers = {
            "x-api-key": t.api_key,
            "anthropic-version": ANTHROPIC_VERSION,
            "content-type": "application/json",
        }
        betas = anthropic_fmt.upstream_betas(req)
        if betas:  # the client's betas, for the fields of its body they enable
            headers["anthropic-beta"] = ",".join(betas)
        return url, body, headers

    async def complete(self, req: ChatRequest, target: Target) -> ChatResponse:
        url, body, headers = self._call(req, target)
        raw = await self.http.post_json(url, body, headers)
        try:
            return anthropic_fmt.parse_response(raw)
        except Exception as err:  # noqa: BLE001
            raise _malformed(err) from None

    async def stream(self, req: ChatRequest, target: Target) -> AsyncIterator[StreamEvent]:
        url, body, headers = self._call(req, target)
        chunks = await self.http.post_stream(url, body, headers)
        parser = anthropic_fmt.StreamParser()
        feed = lambda m: parser.feed(m.event, m.data)  # noqa: E731
        async for ev in _sse_events(chunks, feed, parser.finish):
            yield ev


class GeminiProvider:
    """Gemini generateContent / streamGenerateContent (?alt=sse)."""

    def __init__(self, http: UpstreamHTTP) -> None:
        self.http = http

    def _call(
        self, req: ChatRequest, t: Target, stream: bool
    ) -> tuple[str, dict[str, Any], dict[str, str]]:
        body = gemini_fmt.render_request(req, t.upstream_model)
        verb = "streamGenerateContent?alt=sse" if stream else "generateContent"
        url = f"{t.channel.config.resolved_base_url()}/v1beta/models/{t.upstream_model}:{verb}"
        headers = {"x-goog-api-key": t.api_key, "content-type": "application/json"}
        return url, body, headers

    async def complete(self, req: ChatRequest, target: Target) -> ChatResponse:
        url, body, headers = self._call(req, target, stream=False)
        raw = await self.http.post_json(url, body, headers)
        try:
            return gemini_fmt.parse_response(raw, target.upstream_model)
        except Exception as err:  # noqa: BLE001
            raise _malformed(err) from None

    async def stream(self, req: ChatRequest, target: Target) -> AsyncIterator[StreamEvent]:
        url, body, headers = self._call(req, target, stream=True)
        chunks = await self.http.post_stream(url, body, headers)
        parser = gemini_fmt.StreamParser(target.upstream_model)
        async for ev in _sse_events(chunks, lambda m: parser.feed(m.data), parser.finish):
            yield ev


def make_providers(http: UpstreamHTTP) -> dict[str, Provider]:
    """One adapter per channel type."""
    oa = OpenAIProvider(http)
    return {
        "openai": oa,
        "deepseek": oa,
        "openai_compatible": oa,
        "anthropic": AnthropicProvider(http),
        "gemini": GeminiProvider(http),
    }
