"""The parts of a request the model reads as its prompt, walked once for every
prompt-size estimate (the count_tokens endpoint, a budget's worst case).

Each estimate differs only in what a text costs (tokenizer or characters); the
walk, what it counts and the fixed costs of an image and a message live here so
the two cannot drift apart. Thinking from earlier turns is not counted:
Anthropic strips it from the context. Blocks kept verbatim count as their JSON.
"""

from __future__ import annotations

from collections.abc import Iterator

from tiergate.core.model import ChatRequest, ImagePart, RawBlock, TextPart
from tiergate.formats import dumps

IMAGE_TOKENS = 1600  # Anthropic's figure for an image near its 1.15 megapixel cap
MESSAGE_OVERHEAD = 4  # role markers and separators around each message


def prompt_texts(req: ChatRequest) -> Iterator[str]:
    """Every text the prompt carries: system, message text, tool calls, verbatim
    blocks and tool schemas (name, description and parameters, or the native spec)."""
    for p in req.system:
        yield p.text
    for m in req.messages:
        for part in m.content:
            if isinstance(part, TextPart):
                yield part.text
            elif isinstance(part, RawBlock):
                yield dumps(part.block)
        for call in m.tool_calls:
            yield call.name
            yield call.arguments
    for tool in req.tools:
        if tool.native is not None:
            yield dumps(tool.native)
        else:
            yield tool.name
            yield tool.description
            yield dumps(tool.parameters)


def fixed_tokens(req: ChatRequest) -> int:
    """Tokens that do not come from text: each message's overhead and each image."""
    images = sum(isinstance(p, ImagePart) for m in req.messages for p in m.content)
    return MESSAGE_OVERHEAD * len(req.messages) + IMAGE_TOKENS * images
