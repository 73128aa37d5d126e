"""OpenAI chat completions <-> the neutral model.

Inbound: clients of `POST /v1/chat/completions`. Upstream: OpenAI, DeepSeek and
any OpenAI-compatible server. DeepSeek differs enough to need a switch: it
takes `max_tokens` (not `max_completion_tokens`), has no image input, only
`json_object` JSON mode, and requires `reasoning_content` to be sent back for
assistant turns that called tools. docs/conversion.md has the full table.
"""

from tiergate.formats.openai.request import MEMO_FORMAT, parse_request, render_request
from tiergate.formats.openai.response import (
    parse_response,
    parse_usage,
    render_response,
    render_usage,
)
from tiergate.formats.openai.stream import StreamParser, StreamRenderer

__all__ = [
    "MEMO_FORMAT",
    "StreamParser",
    "StreamRenderer",
    "parse_request",
    "parse_response",
    "parse_usage",
    "render_request",
    "render_response",
    "render_usage",
]
