"""A parsed request's prompt size in tokens, estimated locally with tiergate's
own tokenizer (core.tokens): what `/v1/messages/count_tokens` answers and what
a budget reservation prices (gateway/worst_case.py).
"""

from __future__ import annotations

from tiergate.core.model import ChatRequest, ImagePart, RawBlock, TextPart
from tiergate.core.tokens import count_tokens
from tiergate.formats import dumps

IMAGE_TOKENS = 1600  # Anthropic's figure for an image near its 1.15 megapixel cap
MESSAGE_OVERHEAD = 4  # role markers and separators around each message


def prompt_tokens(req: ChatRequest) -> int:
    """Estimated input tokens: system, messages, tool calls and results, tool schemas.

    Thinking from earlier turns is not counted: Anthropic strips it from the
    context. Blocks kept verbatim count as their JSON text.
    """
    total = sum(count_tokens(p.text) for p in req.system)
    for m in req.messages:
        total += MESSAGE_OVERHEAD
        for part in m.content:
            if isinstance(part, TextPart):
                total += count_tokens(part.text)
            elif isinstance(part, ImagePart):
                total += IMAGE_TOKENS
            elif isinstance(part, RawBlock):
                total += count_tokens(dumps(part.block))
        for call in m.tool_calls:
            total += count_tokens(call.name) + count_tokens(call.arguments)
    for tool in req.tools:
        if tool.native is not None:
            total += count_tokens(dumps(tool.native))
        else:
            total += count_tokens(tool.name) + count_tokens(tool.description)
            total += count_tokens(dumps(tool.parameters))
    return total
