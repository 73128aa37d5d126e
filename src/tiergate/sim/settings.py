"""Knobs of the provider simulator.

Defaults make the simulator instant and faithful: no added latency, unlimited
tokens per second, and each provider's documented cache idle window (5 minutes
for OpenAI, Anthropic and Gemini, 60 minutes for DeepSeek). Benchmarks set
`latency_ms` and `tokens_per_second` to model a real upstream.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class SimSettings:
    latency_ms: float = 0.0
    """Delay before the first byte of every response."""
    tokens_per_second: float = 0.0
    """Output pacing; 0 means the whole reply is available at once."""
    default_output_tokens: int = 40
    """Length of a text reply when the request does not ask for another."""
    stream_chunk_tokens: int = 4
    """Output tokens carried by one streamed delta event."""
    openai_cache_idle_seconds: float = 300.0
    anthropic_cache_idle_seconds: float = 300.0
    """Anthropic's default ("5m") cache_control TTL; "1h" breakpoints last 3600 s."""
    gemini_cache_idle_seconds: float = 300.0
    deepseek_cache_idle_seconds: float = 3600.0
    clock_offset_seconds: float = 0.0
    """Added to wall time; `POST /_sim/clock` advances it so tests never sleep."""
    timeout_fault_seconds: float = 600.0
    """How long a "timeout" fault stalls: far beyond any client timeout."""
    require_anthropic_version: bool = True
    """Reject Anthropic requests without the `anthropic-version` header, as the API does."""
    max_cache_entries_per_identity: int = 500_000
    """Bound on stored prefixes per (api key, model); the oldest are evicted first."""
