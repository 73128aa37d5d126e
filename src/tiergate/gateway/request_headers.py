"""Request headers whose `get` of an absent name does not raise and catch.

Starlette's `Headers` inherits `Mapping.get`, which calls `__getitem__` and
catches its KeyError: an exception per absent header. A router request asks
for several headers that are usually absent (`X-OrcaRouter-Tier`,
`X-OrcaRouter-Escalate`, `X-OrcaRouter-Include-Cost`, ...), so the completion
endpoints use this subclass. Same lookup as `Headers.__getitem__` (the name
lower-cased and compared with the raw names as sent, first match wins);
everything else is Starlette's.
"""

from __future__ import annotations

from starlette.datastructures import Headers
from starlette.requests import Request


class RequestHeaders(Headers):
    """`Headers` with an exception-free `get`."""

    def get(self, key: str, default: str | None = None) -> str | None:  # type: ignore[override]
        wanted = key.lower().encode("latin-1")
        for name, value in self._list:  # what Headers.__getitem__ scans (`raw` copies it)
            if name == wanted:
                return value.decode("latin-1")
        return default


class CompletionRequest(Request):
    """A Starlette Request whose `headers` are RequestHeaders."""

    @property
    def headers(self) -> Headers:
        if not hasattr(self, "_headers"):
            self._headers = RequestHeaders(scope=self.scope)
        return self._headers
