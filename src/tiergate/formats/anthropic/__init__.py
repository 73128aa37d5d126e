"""Anthropic Messages <-> the neutral model.

Inbound: clients of `POST /v1/messages` (Claude Code and the Anthropic SDKs).
Upstream: the Anthropic Messages API. The neutral model keeps tool results as
separate role-"tool" messages (the OpenAI shape); here they are split out of,
and merged back into, user messages of `tool_result` blocks, so an Anthropic
request survives the round trip block for block.

Usage: Anthropic's `input_tokens` excludes cache reads and writes, the neutral
`Usage.input_tokens` is the whole prompt, so parsing adds them and rendering
subtracts them.
"""

from tiergate.formats.anthropic.render import render_request
from tiergate.formats.anthropic.request import (
    DEFAULT_MAX_TOKENS,
    MEMO_FORMAT,
    parse_betas,
    parse_count_request,
    parse_request,
    upstream_betas,
)
from tiergate.formats.anthropic.response import (
    parse_response,
    parse_usage,
    render_response,
    render_usage,
    tool_use_id,
)
from tiergate.formats.anthropic.stream import StreamParser, StreamRenderer
from tiergate.formats.errors import UpstreamStreamError

__all__ = [
    "DEFAULT_MAX_TOKENS",
    "MEMO_FORMAT",
    "StreamParser",
    "StreamRenderer",
    "UpstreamStreamError",
    "parse_betas",
    "parse_count_request",
    "parse_request",
    "parse_response",
    "parse_usage",
    "render_request",
    "render_response",
    "render_usage",
    "tool_use_id",
    "upstream_betas",
]
