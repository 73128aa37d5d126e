"""The one shared upstream HTTP client: pooled keep-alive connections, sane timeouts.

The transport is tiergate.providers.client (asyncio + httptools), chosen over
aiohttp and httpx by measurement (docs/performance.md): it costs a fraction of
their CPU per upstream call. This module maps its failures onto UpstreamError.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any

import orjson

from tiergate import tracing
from tiergate.core.slot_groups import HISTORY_CACHE_BYTES
from tiergate.formats.body_encode import BodyEncodeMemo
from tiergate.providers.base import UpstreamError
from tiergate.providers.client import ClientTimeout, HTTPClient, HTTPClientError, Response
from tiergate.providers.exchange import ProxyError
from tiergate.providers.network import UpstreamNetwork


class UpstreamHTTP:
    """Shared upstream client; the connection pool is created on first use, inside
    the running event loop."""

    def __init__(
        self,
        *,
        connect_timeout: float = 10.0,
        read_timeout: float = 600.0,
        network: UpstreamNetwork | None = None,
        history_bytes: int = HISTORY_CACHE_BYTES,
    ) -> None:
        self._connect_timeout = connect_timeout
        self._read_timeout = read_timeout
        self.network = network or UpstreamNetwork()
        self._client: HTTPClient | None = None
        #: each conversation's last upstream body, for encoding its next one
        self.encoder = BodyEncodeMemo(max_bytes=history_bytes)

    @property
    def client(self) -> HTTPClient:
        if self._client is None:
            self._client = HTTPClient(
                connect_timeout=self._connect_timeout,
                read_timeout=self._read_timeout,
                limit_per_host=512,
                idle_timeout=60.0,
                network=self.network,
            )
        return self._client

    async def close(self) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            await client.close()

    async def post_json(
        self, url: str, body: dict[str, Any], headers: Mapping[str, str]
    ) -> dict[str, Any]:
        """POST and return the parsed JSON body; raise UpstreamError on any failure."""
        trace = b"" if tracing.tracer is None else tracing.upstream_headers()
        try:
            resp = await self.client.post(url, self.encoder.encode(body), headers, trace)
            raw = await resp.read()
        except ClientTimeout:
            raise UpstreamError("timeout", message="upstream timed out") from None
        except HTTPClientError as err:
            raise _connect_error(err) from None
        if resp.status >= 400:
            raise _status_error(resp, raw)
        try:
            parsed = orjson.loads(raw)
        except orjson.JSONDecodeError:
            raise UpstreamError("malformed", resp.status, "upstream sent invalid JSON") from None
        if not isinstance(parsed, dict):
            raise UpstreamError("malformed", resp.status, "upstream sent a non-object body")
        return parsed

    async def post_stream(
        self, url: str, body: dict[str, Any], headers: Mapping[str, str]
    ) -> AsyncIterator[bytes]:
        """POST and yield raw body chunks. Errors before the first chunk raise
        UpstreamError (retryable); a cut after it raises kind 'stream_cut'."""
        trace = b"" if tracing.tracer is None else tracing.upstream_headers()
        try:
            resp = await self.client.post(url, self.encoder.encode(body), headers, trace)
        except ClientTimeout:
            raise UpstreamError("timeout", message="upstream timed out") from None
        except HTTPClientError as err:
            raise _connect_error(err) from None
        if resp.status >= 400:
            try:
                raw = await resp.read()
            except HTTPClientError:
                raw = b""
            finally:
                resp.close()
            raise _status_error(resp, raw)
        return _iter(resp)


async def _iter(resp: Response) -> AsyncIterator[bytes]:
    try:
        while (chunk := await resp.next_chunk()) is not None:
            yield chunk
    except ClientTimeout:
        raise UpstreamError("timeout", message="upstream stalled mid-stream") from None
    except HTTPClientError as err:
        raise UpstreamError("stream_cut", message=type(err).__name__) from None
    finally:
        resp.close()


def _connect_error(err: HTTPClientError) -> UpstreamError:
    """No answer: say why (the client's own messages name hosts and errno, never a
    key or the proxy URL's credentials), and name the proxy when it was the proxy."""
    message = f"{type(err).__name__}: {err}"[:300]
    if isinstance(err, ProxyError):
        return UpstreamError("connect", message=message, proxy=err.proxy, proxy_status=err.status)
    return UpstreamError("connect", message=message)


def _status_error(resp: Response, raw: bytes) -> UpstreamError:
    retry_after: float | None = None
    ra = resp.headers.get("retry-after")
    if ra:
        try:
            retry_after = min(float(ra), 300.0)
        except ValueError:
            retry_after = None
    message = f"upstream returned HTTP {resp.status}"
    code: str | None = None
    provider_body = False
    try:
        doc = orjson.loads(raw)
        provider_body = isinstance(doc, dict) and "error" in doc  # OpenAI, Anthropic, Gemini
        err = doc.get("error")
        if isinstance(err, dict) and isinstance(err.get("message"), str):
            message = f"upstream: {err['message'][:300]}"
            code = _context_code(resp.status, err)
    except Exception:  # noqa: BLE001 - a provider error body is best effort
        pass
    if not provider_body and resp.status in (401, 403):  # the key is kept: say why
        message += " without a provider error body (a proxy or firewall answered?)"
    return UpstreamError(
        "status", resp.status, message, retry_after, code, provider_body=provider_body
    )


#: How each provider words a prompt over the model's context window (sim/context.py).
_TOO_LONG = (
    "prompt is too long",  # Anthropic
    "exceed context limit",  # Anthropic, with max_tokens
    "exceeds the maximum number of tokens allowed",  # Gemini
    "maximum context length",  # OpenAI-compatible servers without the code
)


def _context_code(status: int, err: dict[str, Any]) -> str | None:
    """`context_length_exceeded` when a 400 says the prompt does not fit: the
    client's mistake, relayed as such (gateway/failures.py), never a key's fault."""
    if status != 400:
        return None
    if err.get("code") == "context_length_exceeded":
        return "context_length_exceeded"
    text = str(err.get("message", "")).lower()
    return "context_length_exceeded" if any(w in text for w in _TOO_LONG) else None
