"""SSE framing: the decoder must yield the same events however the bytes are chunked."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tiergate.formats.sse import SSEDecoder, SSEMessage, encode_sse


def decode_all(chunks: list[bytes]) -> list[SSEMessage]:
    dec = SSEDecoder()
    out: list[SSEMessage] = []
    for c in chunks:
        out.extend(dec.feed(c))
    out.extend(dec.finish())
    return out


def split_at(raw: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(raw) + 1) for c in cuts})
    pieces, last = [], 0
    for p in points:
        pieces.append(raw[last:p])
        last = p
    pieces.append(raw[last:])
    return pieces


def test_lf_crlf_and_cr_line_endings_decode_alike() -> None:
    for nl in (b"\n", b"\r\n", b"\r"):
        raw = b"event: ping" + nl + b"data: {}" + nl + nl + b"data: two" + nl + nl
        assert decode_all([raw]) == [SSEMessage("ping", "{}"), SSEMessage(None, "two")]


def test_multiline_data_comments_and_field_spacing() -> None:
    raw = b": keep-alive\n\ndata:a\ndata: b\ndata\nid: 7\nretry: 10\nfoo: bar\n\n"
    assert decode_all([raw]) == [SSEMessage(None, "a\nb\n")]


def test_event_without_data_is_not_dispatched_and_resets_event_name() -> None:
    raw = b"event: lonely\n\ndata: x\n\n"
    assert decode_all([raw]) == [SSEMessage(None, "x")]


def test_partial_chunks_and_split_utf8() -> None:
    raw = "data: héllo — ✓\n\n".encode()
    chunks = [raw[i : i + 1] for i in range(len(raw))]
    dec = SSEDecoder()
    seen = [m for c in chunks for m in dec.feed(c)]
    assert seen == [SSEMessage(None, "héllo — ✓")]


def test_crlf_split_between_chunks_is_one_line_ending() -> None:
    dec = SSEDecoder()
    assert dec.feed(b"data: a\r") == []
    assert dec.feed(b"\n\r") == []
    assert dec.feed(b"\ndata: b\r\n\r\n") == [SSEMessage(None, "a"), SSEMessage(None, "b")]


def test_finish_flushes_an_unterminated_last_event() -> None:
    dec = SSEDecoder()
    assert dec.feed(b"data: tail") == []
    assert dec.finish() == [SSEMessage(None, "tail")]


def test_encode_single_and_multiline() -> None:
    assert encode_sse(b'{"a":1}') == b'data: {"a":1}\n\n'
    assert encode_sse("x", event="message_stop") == b"event: message_stop\ndata: x\n\n"
    assert encode_sse("a\nb") == b"data: a\ndata: b\n\n"


_EVENTS = st.lists(
    st.tuples(
        st.one_of(st.none(), st.sampled_from(["message_start", "content_block_delta", "ping"])),
        st.text(alphabet=st.characters(exclude_categories=["Cs"]), max_size=40),
    ),
    min_size=1,
    max_size=8,
)


@settings(max_examples=150, deadline=None)
@given(_EVENTS, st.lists(st.integers(min_value=0, max_value=10_000), max_size=12), st.booleans())
def test_round_trip_through_any_chunking(
    events: list[tuple[str | None, str]], cuts: list[int], crlf: bool
) -> None:
    raw = b": comment\n\n" + b"".join(encode_sse(d, e) for e, d in events)
    if crlf:
        raw = raw.replace(b"\n", b"\r\n")
    expected = [SSEMessage(e, d.replace("\r\n", "\n").replace("\r", "\n")) for e, d in events]
    assert decode_all(split_at(raw, cuts)) == expected
