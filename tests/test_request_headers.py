"""RequestHeaders.get answers exactly as Starlette's Headers.get does."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from starlette.datastructures import Headers

from tiergate.gateway.request_headers import CompletionRequest, RequestHeaders

NAMES = ["authorization", "x-orcarouter-tier", "X-Session-Id", "x-session-id", "content-length"]
raw_headers = st.lists(
    st.tuples(
        st.sampled_from(NAMES).map(str.encode),
        st.text(max_size=8).map(lambda t: t.encode("latin-1", "replace")),
    ),
    max_size=6,
)


@given(raw_headers, st.sampled_from([*NAMES, "X-ORCAROUTER-TIER", "absent"]))
def test_get_matches_starlette(raw: list[tuple[bytes, bytes]], name: str) -> None:
    scope = {"type": "http", "headers": raw}
    assert RequestHeaders(scope=scope).get(name) == Headers(scope=scope).get(name)
    assert RequestHeaders(scope=scope).get(name, "d") == Headers(scope=scope).get(name, "d")


def test_completion_requests_use_them() -> None:
    scope = {"type": "http", "headers": [(b"x-orcarouter-tier", b"strong")]}
    headers = CompletionRequest(scope).headers
    assert isinstance(headers, RequestHeaders)
    assert headers.get("X-OrcaRouter-Tier") == "strong" and headers.get("x-absent") is None
    assert CompletionRequest(scope).headers["x-orcarouter-tier"] == "strong"
