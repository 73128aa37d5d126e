"""The parts of a request the model reads as its prompt, walked once for every
prompt-size estimate (the count_tokens endpoint, a budget's worst case).

Each estimate differs only in what a text costs (tokenizer or characters); the
walk, what it counts and the fixed costs of an image and a message live here so
the two cannot drift apart. Thinking from earlier turns is not counted:
Anthropic strips it from the context. Blocks kept verbatim count as their JSON.
"""

from __future__ import annotations

import operator
from collections.abc import Iterator

from tiergate.core.model import ChatRequest, ImagePart, Message, RawBlock, TextPart
from tiergate.formats import dumps
from tiergate.formats.render_memo import HistoryMemo

IMAGE_TOKENS = 1600  # Anthropic's figure for an image near its 1.15 megapixel cap
MESSAGE_OVERHEAD = 4  # role markers and separators around each message


def prompt_texts(req: ChatRequest) -> Iterator[str]:
    """Every text the prompt carries: system, message text, tool calls, verbatim
    blocks and tool schemas (name, description and parameters, or the native spec)."""
    for p in req.system:
        yield p.text
    for m in req.messages:
        yield from message_texts(m)
    yield from tool_texts(req)


def message_texts(m: Message) -> Iterator[str]:
    """One message's share of `prompt_texts`."""
    for part in m.content:
        if isinstance(part, TextPart):
            yield part.text
        elif isinstance(part, RawBlock):
            yield dumps(part.block)
    for call in m.tool_calls:
        yield call.name
        yield call.arguments


def tool_texts(req: ChatRequest) -> Iterator[str]:
    """The tool schemas' share of `prompt_texts`."""
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


#: Per message, its characters of prompt text and its images, for each conversation's
#: history (formats/render_memo.py): a budget's worst case is estimated on every
#: request, and walking every message's text each turn grew with the session.
_per_message: HistoryMemo[tuple[int, int]] = HistoryMemo()


def _chars_and_images(m: Message) -> tuple[int, int]:
    return sum(map(len, message_texts(m))), sum(isinstance(p, ImagePart) for p in m.content)


def prompt_size(req: ChatRequest) -> tuple[int, int]:
    """(characters of every prompt text, tokens that come from no text): what
    `prompt_texts` and `fixed_tokens` give, with the history's share reused from
    the conversation's previous request (the same Message objects)."""
    per = _per_message.render(req.messages, "size", _chars_and_images)
    chars = sum(len(p.text) for p in req.system) + sum(map(_first, per))
    chars += sum(map(len, tool_texts(req)))
    images = sum(map(_second, per))
    return chars, MESSAGE_OVERHEAD * len(req.messages) + IMAGE_TOKENS * images


_first = operator.itemgetter(0)
_second = operator.itemgetter(1)
