"""Price table and the exact, cache-aware cost of one request.

Prices are USD per 1M tokens from the channel's model config. Providers bill
cached reads at a discount (0.1x input unless the table says otherwise) and
Anthropic bills cache writes at a premium (1.25x input, 5-minute TTL); other
providers bill the tokens that populate their cache at the plain input price.
"""

from __future__ import annotations

from tiergate.config import ModelConfig
from tiergate.core.model import Usage

#: Cache-read price as a multiple of the input price, per channel type.
CACHE_READ_MULTIPLIER: dict[str, float] = {
    "openai": 0.1,
    "anthropic": 0.1,
    "gemini": 0.1,
    "deepseek": 0.1,
    "openai_compatible": 0.1,
}
#: Cache-write price as a multiple of the input price, per channel type.
CACHE_WRITE_MULTIPLIER: dict[str, float] = {"anthropic": 1.25}

_PER_TOKEN = 1e-6


def unit_prices(model: ModelConfig, channel_type: str) -> tuple[float, float, float, float]:
    """(input, cached_read, cache_write, output) USD per 1M tokens."""
    p = model.price
    cached = (
        p.cached_input
        if p.cached_input is not None
        else p.input * CACHE_READ_MULTIPLIER.get(channel_type, 0.1)
    )
    write = (
        p.cache_write
        if p.cache_write is not None
        else p.input * CACHE_WRITE_MULTIPLIER.get(channel_type, 1.0)
    )
    return p.input, cached, write, p.output


def request_cost(usage: Usage, model: ModelConfig, channel_type: str) -> float:
    """Exact USD cost of one request's usage under the model's price table."""
    p_in, p_cached, p_write, p_out = unit_prices(model, channel_type)
    return _PER_TOKEN * (
        usage.uncached_input_tokens * p_in
        + usage.cache_read_tokens * p_cached
        + usage.cache_write_tokens * p_write
        + usage.output_tokens * p_out
    )


def uncached_cost(usage: Usage, model: ModelConfig) -> float:
    """What the same usage would cost with no prompt cache (for 'saved by affinity')."""
    return _PER_TOKEN * (
        usage.input_tokens * model.price.input + usage.output_tokens * model.price.output
    )


def worst_case_cost(
    model: ModelConfig, channel_type: str, prompt_tokens: int, output_tokens: int
) -> float:
    """The most a request of this size can cost on this channel: every prompt token
    at the dearer of the input and cache-write prices (no cache read), every
    allowed output token at the output price. What a budget reservation holds."""
    p_in, _, p_write, p_out = unit_prices(model, channel_type)
    return _PER_TOKEN * (prompt_tokens * max(p_in, p_write) + output_tokens * p_out)
