"""Prompt caching as each provider does it, keyed per API key and model.

A cache entry is the hash of an exact token prefix (see prompt.index_prompt)
with an idle deadline; reading an entry refreshes the deadline. Two rule
families exist:

- automatic (OpenAI, DeepSeek, Gemini implicit): every request stores each of
  its prefixes that sits on the provider's grid (OpenAI: 1,024 tokens then
  128-token steps; DeepSeek: 64-token units; Gemini: 1,024 then 128, the grid
  being our approximation since Google does not publish one); the cached part
  of the next request is its longest stored grid prefix;
- breakpoints (Anthropic): only prefixes ending at a `cache_control` block are
  written (when at least 1,024 tokens long). A request reads the longest cached
  prefix ending at one of its breakpoints or at one of the 20 content blocks
  before a breakpoint (Anthropic's documented look-back, which is what lets a
  breakpoint on the last message hit the previous turn's entry). It writes the
  tokens from there up to its last breakpoint.

Decision code only: the caller passes the clock reading in.
"""

from __future__ import annotations

from dataclasses import dataclass

from tiergate.sim.prompt import PromptBlock, PromptIndex, Provider
from tiergate.sim.settings import SimSettings

ANTHROPIC_LOOKBACK_BLOCKS = 20
ONE_HOUR = 3600.0

Identity = tuple[str, str, str]
"""(provider family, api key, model)."""


@dataclass(frozen=True, slots=True)
class AutomaticRule:
    min_tokens: int
    step: int
    idle_seconds: float


@dataclass(frozen=True, slots=True)
class CacheOutcome:
    read: int = 0
    write: int = 0
    """All tokens written (Anthropic only), including `write_1h`."""
    write_1h: int = 0


def automatic_rule(provider: Provider, settings: SimSettings) -> AutomaticRule:
    if provider == "deepseek":
        return AutomaticRule(64, 64, settings.deepseek_cache_idle_seconds)
    if provider == "gemini":
        return AutomaticRule(1024, 128, settings.gemini_cache_idle_seconds)
    return AutomaticRule(1024, 128, settings.openai_cache_idle_seconds)


class PromptCache:
    """All cached prefixes of the simulator, per (provider, api key, model)."""

    ANTHROPIC_MIN_TOKENS = 1024

    def __init__(self, settings: SimSettings) -> None:
        self._settings = settings
        # prefix hash -> (idle deadline, idle window); dict order is refresh order.
        self._stores: dict[Identity, dict[int, tuple[float, float]]] = {}

    def clear(self) -> None:
        self._stores.clear()

    def entry_count(self) -> int:
        return sum(len(s) for s in self._stores.values())

    # -- automatic caching -------------------------------------------------

    def automatic(
        self,
        identity: Identity,
        prompt: PromptIndex,
        rule: AutomaticRule,
        now: float,
        idle_seconds: float | None = None,
    ) -> CacheOutcome:
        """Read the longest cached grid prefix, then store every grid prefix."""
        if prompt.total < rule.min_tokens:
            return CacheOutcome()
        store = self._store(identity, now)
        idle = idle_seconds or rule.idle_seconds
        top = rule.min_tokens + (prompt.total - rule.min_tokens) // rule.step * rule.step
        grid = range(top, rule.min_tokens - 1, -rule.step)
        read = 0
        for pos in grid:
            if self._alive(store, prompt.hashes[pos], now):
                read = pos
                break
        for pos in reversed(grid):
            self._put(store, prompt.hashes[pos], now, idle)
        return CacheOutcome(read=read)

    # -- Anthropic breakpoints -------------------------------------------

    def breakpoints(
        self, identity: Identity, blocks: list[PromptBlock], prompt: PromptIndex, now: float
    ) -> CacheOutcome:
        marks = [i for i, b in enumerate(blocks) if b.cache_ttl]
        if not marks:
            return CacheOutcome()
        store = self._store(identity, now)
        read = 0
        read_hash: int | None = None
        for candidate in self._lookback_positions(blocks, prompt, marks):
            h = prompt.hashes[candidate]
            if candidate > read and self._alive(store, h, now):
                read, read_hash = candidate, h
        if read_hash is not None:
            self._refresh(store, read_hash, now)
        last_end = prompt.block_ends[marks[-1]]
        if last_end < self.ANTHROPIC_MIN_TOKENS:
            return CacheOutcome(read=read)
        write = write_1h = 0
        covered = read
        for i in marks:
            end = prompt.block_ends[i]
            ttl = (
                ONE_HOUR
                if blocks[i].cache_ttl == "1h"
                else self._settings.anthropic_cache_idle_seconds
            )
            if end > covered:
                write += end - covered
                if ttl == ONE_HOUR:
                    write_1h += end - covered
                covered = end
            if end >= self.ANTHROPIC_MIN_TOKENS:
                self._put(store, prompt.hashes[end], now, ttl)
        return CacheOutcome(read=read, write=write, write_1h=write_1h)

    @staticmethod
    def _lookback_positions(
        blocks: list[PromptBlock], prompt: PromptIndex, marks: list[int]
    ) -> set[int]:
        positions: set[int] = set()
        for mark in marks:
            seen = 0
            i = mark
            while i >= 0 and seen <= ANTHROPIC_LOOKBACK_BLOCKS:
                if not blocks[i].marker:
                    positions.add(prompt.block_ends[i])
                    seen += 1
                i -= 1
        return positions

    # -- storage -------------------------------------------------------------

    def _store(self, identity: Identity, now: float) -> dict[int, tuple[float, float]]:
        store = self._stores.get(identity)
        if store is None:
            store = self._stores[identity] = {}
        else:
            self._trim_expired_head(store, now)
        return store

    @staticmethod
    def _trim_expired_head(store: dict[int, tuple[float, float]], now: float) -> None:
        """Drop a few expired entries from the least recently used end.

        Dict order is refresh order, so expired entries gather at the head;
        trimming a bounded number per request keeps memory flat without sweeps.
        """
        for _ in range(64):
            h = next(iter(store), None)
            if h is None or store[h][0] >= now:
                return
            del store[h]

    @staticmethod
    def _alive(store: dict[int, tuple[float, float]], h: int, now: float) -> bool:
        entry = store.get(h)
        return entry is not None and entry[0] >= now

    @staticmethod
    def _refresh(store: dict[int, tuple[float, float]], h: int, now: float) -> None:
        _, idle = store.pop(h)
        store[h] = (now + idle, idle)

    def _put(self, store: dict[int, tuple[float, float]], h: int, now: float, idle: float) -> None:
        old = store.pop(h, None)
        if old is not None:
            idle = max(idle, old[1])
        store[h] = (now + idle, idle)
        if len(store) > self._settings.max_cache_entries_per_identity:
            self._evict(store, now)

    def _evict(self, store: dict[int, tuple[float, float]], now: float) -> None:
        """Drop expired entries; if still full, the least recently used half."""
        for h in [h for h, (deadline, _) in store.items() if deadline < now]:
            del store[h]
        limit = self._settings.max_cache_entries_per_identity
        if len(store) > limit:
            for h in list(store)[: len(store) - limit // 2]:
                del store[h]
