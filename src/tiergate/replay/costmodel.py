"""The replay's cost model (report §5.2), stated in full so it can be disagreed with.

Prices are list prices in USD per 1M tokens (table below, dated). Cache
semantics per provider: a cache read costs 0.1x the input price everywhere; a
cache write costs 1.25x at Anthropic (5-minute TTL) and 1x elsewhere, where the
tokens that populate the cache are billed as plain input.

Per turn, with `prompt` the turn's prompt tokens and `prefix` the tokens it
shares with the session's previous served request:

    warm turn  = 0.1 * p_in * prefix + write * p_in * (prompt - prefix)
    cold turn  = write * p_in * prompt
    output     = p_out * output_tokens            (fixed 500 per turn by default)

Turn 1 is always cold (a full write). Each model keeps its own cache of the
session, alive within that provider's cache window since the model last served
it, as providers do: a switch to a model that has not served the session
within its window, and every turn after an idle gap longer than the window, is
charged cold, so the mechanism pays for its own cache invalidation. A switch
back to a model whose cache is still alive reads what that model cached: the
prefix its last served request shares with this one, bounded below by the
smallest turn-to-turn shared prefix since then (two requests share at least
the shortest prefix of every step between them). So a session the share cap
flips strong, base, strong pays a cold base read and a partial strong re-read,
not two full cold reads.

Session affinity decides the key. With affinity the session keeps its
{channel, key}, so an alive cache is hit (warmth 1). Without affinity the
balancer spreads turns over the model's N keys, so the previous turn's key is
hit with probability 1/N (`warmth="uniform"`), or with the Herfindahl index
sum(w_i^2) of the key weights (`warmth="herfindahl"`); the turn's cost is the
expectation `h * warm + (1 - h) * cold`. Only the previous turn's key counts
(a key used two turns ago may still hold a shorter prefix; ignored).

Which model of a tier's pair serves a session is a weighted pick by a stable
hash of the session id, as a balancer's first pick that the model pin then
holds: the same session gets the same base model under every policy and
keeps it across escalation, so policies compare session by session.

Not modelled: minimum cacheable prefix lengths (1,024 tokens) and cache grid
granularity; the end-to-end mode measures the simulator's real cache rules.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

Warmth = Literal["uniform", "herfindahl"]
Tier = Literal["base", "strong"]

PRICES_AS_OF = "2026-11-29"
"""The date the price table was taken from the providers' public list prices (the same
figures as tiergate's built-in catalogue, tiergate/defaults.py)."""

CACHE_READ_MULTIPLIER = 0.1
CACHE_WRITE_MULTIPLIER: Mapping[str, float] = {"anthropic": 1.25}
CACHE_WINDOW_SECONDS: Mapping[str, float] = {"deepseek": 3600.0}
DEFAULT_CACHE_WINDOW = 300.0
DEFAULT_OUTPUT_TOKENS = 500
DEFAULT_KEYS = 3
_PER_TOKEN = 1e-6


@dataclass(frozen=True, slots=True)
class ModelPrice:
    """One model's list price and how its channel serves it (provider type and keys)."""

    name: str
    provider: str
    input: float
    output: float
    keys: int = DEFAULT_KEYS
    key_weights: tuple[float, ...] = ()
    weight: float = 1.0
    """The model's share of its tier's sessions (the balancer's first pick)."""

    @property
    def write_multiplier(self) -> float:
        return CACHE_WRITE_MULTIPLIER.get(self.provider, 1.0)

    @property
    def cache_window(self) -> float:
        return CACHE_WINDOW_SECONDS.get(self.provider, DEFAULT_CACHE_WINDOW)

    def key_warmth(self, rule: Warmth) -> float:
        """Chance that a turn without affinity lands on the previous turn's key."""
        if rule == "herfindahl" and self.key_weights:
            total = sum(self.key_weights)
            return sum((w / total) ** 2 for w in self.key_weights) if total > 0 else 1.0
        return 1.0 / max(1, self.keys)


PRICE_TABLE: dict[str, ModelPrice] = {
    m.name: m
    for m in (
        ModelPrice("openai/gpt-5-mini", "openai", input=0.25, output=2.0),
        ModelPrice("gemini/gemini-2.5-flash", "gemini", input=0.30, output=2.5),
        ModelPrice("anthropic/claude-sonnet-4-6", "anthropic", input=3.0, output=15.0),
        ModelPrice("openai/gpt-5", "openai", input=1.25, output=10.0),
    )
}
CHEAP_PAIR = ("openai/gpt-5-mini", "gemini/gemini-2.5-flash")
FRONTIER_PAIR = ("anthropic/claude-sonnet-4-6", "openai/gpt-5")


# ---- pure cost arithmetic ------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TurnCost:
    usd: float
    input_usd: float
    output_usd: float
    cached_tokens: float
    """Expected prompt tokens read from the cache (for the cache hit rate)."""


def warm_input_cost(m: ModelPrice, prompt: int, prefix: int) -> float:
    prefix = min(prefix, prompt)
    return (
        _PER_TOKEN
        * m.input
        * (CACHE_READ_MULTIPLIER * prefix + m.write_multiplier * (prompt - prefix))
    )


def cold_input_cost(m: ModelPrice, prompt: int) -> float:
    return _PER_TOKEN * m.input * m.write_multiplier * prompt


def turn_cost(
    m: ModelPrice, prompt: int, prefix: int, warmth: float, output_tokens: int
) -> TurnCost:
    """Expected cost of one turn: `warmth` is the chance the cached prefix is hit."""
    warm = warm_input_cost(m, prompt, prefix)
    cold = cold_input_cost(m, prompt)
    input_usd = warmth * warm + (1.0 - warmth) * cold
    output_usd = _PER_TOKEN * m.output * output_tokens
    return TurnCost(input_usd + output_usd, input_usd, output_usd, warmth * min(prefix, prompt))


# ---- per-session cache state ---------------------------------------------------------


@dataclass(slots=True)
class _ModelCache:
    """One model's cache of a session: when it last served, and what it still shares."""

    last_served: float
    shared: int
    """Tokens the model's cached prefix shares with the latest request (a lower bound)."""


@dataclass(slots=True)
class SessionCache:
    """Where a session's prompt caches live: one entry per model that served it."""

    models: dict[str, _ModelCache] = field(default_factory=dict)

    def advance(self, prefix: int) -> None:
        """A new request sharing `prefix` tokens with the previous served one arrived."""
        for c in self.models.values():
            c.shared = min(c.shared, prefix)

    def warm_prefix(self, m: ModelPrice, now: float) -> int | None:
        """Tokens `m`'s alive cache can serve of this request; None when it is cold."""
        c = self.models.get(m.name)
        if c is None or now - c.last_served > m.cache_window:
            return None
        return c.shared

    def served(self, m: ModelPrice, now: float, prompt: int) -> None:
        self.models[m.name] = _ModelCache(now, prompt)


# ---- the model ---------------------------------------------------------------------


def _stable_fraction(*parts: str) -> float:
    digest = hashlib.blake2b("\x00".join(parts).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


@dataclass(frozen=True)
class CostModel:
    """Tier pools with prices, the output assumption and the warmth rule."""

    tiers: Mapping[str, Sequence[ModelPrice]] = field(
        default_factory=lambda: {
            "base": tuple(PRICE_TABLE[n] for n in CHEAP_PAIR),
            "strong": tuple(PRICE_TABLE[n] for n in FRONTIER_PAIR),
        }
    )
    output_tokens: int = DEFAULT_OUTPUT_TOKENS
    warmth: Warmth = "uniform"

    def pinned(self, session_id: str, tier: str) -> ModelPrice:
        """The tier's model for this session: a stable weighted pick, as a pinned first pick."""
        pool = self.tiers[tier]
        total = sum(m.weight for m in pool)
        x = _stable_fraction(session_id, tier) * total
        for m in pool:
            x -= m.weight
            if x < 0:
                return m
        return pool[-1]

    def turn(
        self,
        cache: SessionCache,
        m: ModelPrice,
        now: float,
        prompt: int,
        prefix: int,
        affinity: bool,
        output_tokens: int | None = None,
    ) -> TurnCost:
        """Cost one served turn and record it in the session's cache state.

        `prefix` is what the request shares with the session's previous served
        request, whichever model served it."""
        cache.advance(prefix)
        warmth = 0.0
        warm = cache.warm_prefix(m, now)
        if warm is not None:
            warmth = 1.0 if affinity else m.key_warmth(self.warmth)
        cost = turn_cost(
            m,
            prompt,
            warm or 0,
            warmth,
            self.output_tokens if output_tokens is None else output_tokens,
        )
        cache.served(m, now, prompt)
        return cost

    def describe(self) -> dict[str, object]:
        """The parameters, for the metrics JSON and the report."""
        return {
            "prices_as_of": PRICES_AS_OF,
            "usd_per_million_tokens": {
                tier: [
                    {
                        "model": m.name,
                        "provider": m.provider,
                        "input": m.input,
                        "cached_input": round(m.input * CACHE_READ_MULTIPLIER, 6),
                        "cache_write": round(m.input * m.write_multiplier, 6),
                        "output": m.output,
                        "keys": m.keys,
                        "cache_window_seconds": m.cache_window,
                        "weight": m.weight,
                    }
                    for m in pool
                ]
                for tier, pool in self.tiers.items()
            },
            "output_tokens_per_turn": self.output_tokens,
            "warmth_without_affinity": self.warmth,
        }
