"""Server-sent events: an incremental decoder and an encoder.

Both sit on the streaming hot path (every upstream token passes through the
decoder, every client token through the encoder), so they work on whole
buffers with bytes.find/split instead of byte-by-byte state machines.

Decoding follows the WHATWG EventSource rules that matter for LLM APIs: lines
end in LF, CRLF or CR; `data:` lines of one event are joined with LF; a blank
line dispatches; lines starting with `:` are comments (keep-alives); one
space after the colon is dropped; an event with no data is not dispatched.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class SSEMessage:
    event: str | None
    data: str


class SSEDecoder:
    """Feed raw bytes as they arrive; get back the events completed so far."""

    __slots__ = ("_buf", "_data", "_event")

    def __init__(self) -> None:
        self._buf = b""
        self._event: str | None = None
        self._data: list[str] = []

    def feed(self, chunk: bytes) -> list[SSEMessage]:
        buf = self._buf + chunk if self._buf else chunk
        held = b""
        if b"\r" in buf:
            if buf.endswith(b"\r"):
                # Maybe the first half of a CRLF split across chunks: decide later.
                buf, held = buf[:-1], b"\r"
            buf = buf.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        end = buf.rfind(b"\n")
        if end < 0:
            self._buf = buf + held
            return []
        self._buf = buf[end + 1 :] + held
        # Splitting on LF never cuts a UTF-8 sequence, so whole lines decode safely.
        lines = buf[:end].decode("utf-8", errors="replace").split("\n")
        out: list[SSEMessage] = []
        for line in lines:
            self._line(line, out)
        return out

    def finish(self) -> list[SSEMessage]:
        """Flush at end of stream: an unterminated final line, then a pending event.

        Strict EventSource discards an event that was never followed by a blank
        line; LLM APIs always send one, so flushing only helps sloppy servers.
        """
        out: list[SSEMessage] = []
        rest, self._buf = self._buf, b""
        if rest.strip(b"\r\n"):
            self._line(rest.rstrip(b"\r\n").decode("utf-8", errors="replace"), out)
        self._line("", out)
        return out

    def _line(self, line: str, out: list[SSEMessage]) -> None:
        if line.startswith("data:"):
            value = line[5:]
            self._data.append(value[1:] if value.startswith(" ") else value)
            return
        if not line:
            if self._data:
                out.append(SSEMessage(self._event, "\n".join(self._data)))
                self._data = []
            self._event = None
            return
        if line[0] == ":":
            return
        name, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        if name == "event":
            self._event = value or None
        elif name == "data":  # "data" with no colon: an empty data line
            self._data.append(value)
        # "id", "retry" and unknown fields do not matter to LLM streams.


def encode_sse(data: bytes | str, event: str | None = None) -> bytes:
    """One SSE event. Multi-line data becomes several `data:` lines, as the spec requires."""
    raw = data.encode() if isinstance(data, str) else data
    if b"\n" in raw or b"\r" in raw:
        lines = raw.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")
        body = b"".join(b"data: " + line + b"\n" for line in lines) + b"\n"
    else:
        body = b"data: " + raw + b"\n\n"
    if event is None:
        return body
    return b"event: " + event.encode() + b"\n" + body
