"""The most a request can cost, known at admission: what a budget reservation holds.

Prompt tokens are estimated from the parsed body's characters, CHARS_PER_TOKEN
to a token: tiergate's tokenizer (core.tokens) gives about 4 on prose and 3.2
on an agent's code-heavy transcript, so 2.5 errs high (text of one character a
token, such as CJK, is underestimated). It takes about 20 us on a 100 KB body,
where the tokenizer takes milliseconds (bench/bench_admission.py), and the
history's share is reused from the conversation's previous request
(prompt_parts.prompt_size), so it does not grow with the session. Output
tokens are the request's `max_tokens` (`max_output_tokens`,
`max_completion_tokens`), or DEFAULT_OUTPUT_TOKENS when it sets none, never
more than the model's context window leaves. The price is the dearest of every
model the plan may serve (its first choice and each fallback) on every channel
that serves it, so a fallback to a dearer model cannot exceed what was held.
Pure.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from tiergate.billing import worst_case_cost
from tiergate.config import ModelConfig
from tiergate.core.model import ChatRequest
from tiergate.gateway.prompt_parts import prompt_size

#: Output cap assumed when a request sets no max_tokens (OpenAI's gpt-4o cap; an
#: Anthropic request always sets one).
DEFAULT_OUTPUT_TOKENS = 16_384
CHARS_PER_TOKEN = 2.5


def prompt_tokens_upper(req: ChatRequest) -> int:
    """A high estimate of the prompt's tokens: every prompt text at CHARS_PER_TOKEN
    characters a token, plus the fixed costs of messages and images."""
    chars, fixed = prompt_size(req)
    return fixed + math.ceil(chars / CHARS_PER_TOKEN)


def output_tokens(max_tokens: int | None, model: ModelConfig, prompt_tokens: int) -> int:
    """The most output tokens the model may write for this request."""
    room = max(1, model.context_window - prompt_tokens)
    return min(max_tokens if max_tokens is not None else DEFAULT_OUTPUT_TOKENS, room)


def request_worst_case(
    offers: Iterable[tuple[ModelConfig, str]], prompt_tokens: int, max_tokens: int | None
) -> float:
    """The dearest worst case over `offers` ((model config, channel type) pairs)."""
    worst = 0.0
    for model, channel_type in offers:
        out = output_tokens(max_tokens, model, prompt_tokens)
        worst = max(worst, worst_case_cost(model, channel_type, prompt_tokens, out))
    return worst
