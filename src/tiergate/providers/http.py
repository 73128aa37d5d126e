"""The one shared upstream HTTP client: pooled connections, sane timeouts.

aiohttp was chosen over httpx for the upstream side by measurement (see
docs/performance.md): on this hot path it adds less per-request overhead.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any

import aiohttp
import orjson

from tiergate.providers.base import UpstreamError


class UpstreamHTTP:
    """Shared aiohttp session. Create inside the running event loop."""

    def __init__(self, *, connect_timeout: float = 10.0, read_timeout: float = 600.0) -> None:
        self._timeout = aiohttp.ClientTimeout(
            total=None, connect=connect_timeout, sock_read=read_timeout
        )
        self._session: aiohttp.ClientSession | None = None

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._session is None:
            connector = aiohttp.TCPConnector(limit=0, limit_per_host=512, ttl_dns_cache=300)
            self._session = aiohttp.ClientSession(
                connector=connector,
                timeout=self._timeout,
                json_serialize=lambda o: orjson.dumps(o).decode(),
                auto_decompress=True,
            )
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def post_json(
        self, url: str, body: dict[str, Any], headers: Mapping[str, str]
    ) -> dict[str, Any]:
        """POST and return the parsed JSON body; raise UpstreamError on any failure."""
        try:
            async with self.session.post(url, data=orjson.dumps(body), headers=headers) as resp:
                raw = await resp.read()
                if resp.status >= 400:
                    raise _status_error(resp, raw)
        except UpstreamError:
            raise
        except (TimeoutError, aiohttp.ServerTimeoutError):
            raise UpstreamError("timeout", message="upstream timed out") from None
        except aiohttp.ClientConnectionError as err:
            raise UpstreamError("connect", message=type(err).__name__) from None
        except aiohttp.ClientError as err:
            raise UpstreamError("connect", message=type(err).__name__) from None
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
        try:
            resp = await self.session.post(url, data=orjson.dumps(body), headers=headers)
        except (TimeoutError, aiohttp.ServerTimeoutError):
            raise UpstreamError("timeout", message="upstream timed out") from None
        except aiohttp.ClientError as err:
            raise UpstreamError("connect", message=type(err).__name__) from None
        return self._iter(resp)

    async def _iter(self, resp: aiohttp.ClientResponse) -> AsyncIterator[bytes]:
        try:
            if resp.status >= 400:
                try:
                    raw = await resp.read()
                except aiohttp.ClientError:
                    raw = b""
                raise _status_error(resp, raw)
            try:
                async for chunk in resp.content.iter_any():
                    yield chunk
            except (TimeoutError, aiohttp.ServerTimeoutError):
                raise UpstreamError("timeout", message="upstream stalled mid-stream") from None
            except aiohttp.ClientError as err:
                raise UpstreamError("stream_cut", message=type(err).__name__) from None
        finally:
            resp.release()


def _status_error(resp: aiohttp.ClientResponse, raw: bytes) -> UpstreamError:
    retry_after: float | None = None
    ra = resp.headers.get("retry-after")
    if ra:
        try:
            retry_after = min(float(ra), 300.0)
        except ValueError:
            retry_after = None
    message = f"upstream returned HTTP {resp.status}"
    try:
        err = orjson.loads(raw).get("error")
        if isinstance(err, dict) and isinstance(err.get("message"), str):
            message = f"upstream: {err['message'][:300]}"
    except Exception:  # noqa: BLE001 - a provider error body is best effort
        pass
    return UpstreamError("status", resp.status, message, retry_after)
