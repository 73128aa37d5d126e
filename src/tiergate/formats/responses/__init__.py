"""OpenAI Responses API (`POST /v1/responses`) <-> the neutral model.

Inbound only: Codex CLI and the OpenAI SDKs' `client.responses` talk to
tiergate in this format; upstreams are reached in their own formats, so fields
without a neutral meaning are dropped on purpose, never forwarded.
docs/conversion.md has the field-by-field table.
"""

from tiergate.formats.responses.request import MEMO_FORMAT, parse_request
from tiergate.formats.responses.response import render_response
from tiergate.formats.responses.stream import StreamRenderer

__all__ = ["MEMO_FORMAT", "StreamRenderer", "parse_request", "render_response"]
