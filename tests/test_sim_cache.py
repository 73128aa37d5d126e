"""Prompt-cache rules per provider, on the pure cache and prefix index (no HTTP)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tiergate.sim import prompt
from tiergate.sim.cache import PromptCache, automatic_rule
from tiergate.sim.prompt import IMAGE_TOKENS, UNIT, PromptBlock, index_prompt
from tiergate.sim.settings import SimSettings

SETTINGS = SimSettings()
WORDS = " alpha beta gamma delta"  # 4 tokens


def blocks(*texts: str, ttl: dict[int, str] | None = None) -> list[PromptBlock]:
    marks = ttl or {}
    return [PromptBlock(t, cache_ttl=marks.get(i)) for i, t in enumerate(texts)]


def test_index_counts_tokens_and_hashes_every_cut_point() -> None:
    prompt = index_prompt(blocks(WORDS * 50, WORDS * 10), "m")
    assert prompt.total == 240
    assert prompt.block_ends == [200, 240]
    assert set(prompt.hashes) == {64, 128, 192, 200, 240}


def test_equal_prefixes_hash_equal_and_a_different_block_changes_everything_after() -> None:
    a = index_prompt(blocks(WORDS * 300, "first question"), "m")
    b = index_prompt(blocks(WORDS * 300, "other question", WORDS * 50), "m")
    c = index_prompt(blocks(WORDS * 299 + " omega", "first question"), "m")
    d = index_prompt(blocks(" omega" + WORDS * 299, "first question"), "m")
    assert a.hashes[1200] == b.hashes[1200]
    assert a.hashes[1152] == c.hashes[1152]  # c differs only in its 1,197th token
    assert a.hashes[1200] != c.hashes[1197]
    assert all(a.hashes[p] != d.hashes[p] for p in range(64, 1152, 64))
    assert a.digest != b.digest


def test_openai_caches_only_from_1024_tokens_in_128_token_steps() -> None:
    cache = PromptCache(SETTINGS)
    rule = automatic_rule("openai", SETTINGS)
    ident = ("openai", "k", "gpt")
    short = index_prompt(blocks(WORDS * 250), "gpt")  # 1000 tokens
    assert cache.automatic(ident, short, rule, 0.0).read == 0
    assert cache.automatic(ident, short, rule, 1.0).read == 0

    system = WORDS * 300  # 1200 tokens
    first = index_prompt(blocks(system, "question one"), "gpt")
    assert cache.automatic(ident, first, rule, 2.0).read == 0
    second = index_prompt(blocks(system, "question two" + WORDS * 100), "gpt")
    # The common prefix is the 1200-token system block: 1152 is the last step inside it.
    assert cache.automatic(ident, second, rule, 3.0).read == 1152
    # Repeating the second prompt reads everything up to its own last step.
    assert (
        cache.automatic(ident, second, rule, 4.0).read == 1024 + (second.total - 1024) // 128 * 128
    )


def test_cache_is_per_key_and_per_model() -> None:
    cache = PromptCache(SETTINGS)
    rule = automatic_rule("openai", SETTINGS)
    prompt = index_prompt(blocks(WORDS * 400), "gpt")
    cache.automatic(("openai", "k1", "gpt"), prompt, rule, 0.0)
    assert cache.automatic(("openai", "k2", "gpt"), prompt, rule, 1.0).read == 0
    assert cache.automatic(("openai", "k1", "gpt-mini"), prompt, rule, 1.0).read == 0
    assert cache.automatic(("openai", "k1", "gpt"), prompt, rule, 1.0).read == 1536


def test_idle_expiry_and_refresh_on_read() -> None:
    cache = PromptCache(SETTINGS)
    rule = automatic_rule("openai", SETTINGS)
    ident = ("openai", "k", "gpt")
    prompt = index_prompt(blocks(WORDS * 400), "gpt")
    cache.automatic(ident, prompt, rule, 0.0)
    assert cache.automatic(ident, prompt, rule, 299.0).read == 1536  # refreshed at 299
    assert cache.automatic(ident, prompt, rule, 598.0).read == 1536  # still within 300 s
    assert cache.automatic(ident, prompt, rule, 899.0).read == 0  # idle 301 s: gone


def test_deepseek_uses_64_token_units_and_a_one_hour_life() -> None:
    cache = PromptCache(SETTINGS)
    rule = automatic_rule("deepseek", SETTINGS)
    ident = ("deepseek", "k", "deepseek-chat")
    cache.automatic(ident, index_prompt(blocks(WORDS * 30, "a"), "d"), rule, 0.0)  # 120 + 1
    hit = cache.automatic(ident, index_prompt(blocks(WORDS * 30, "b"), "d"), rule, 3000.0)
    assert hit.read == 64
    assert (
        cache.automatic(ident, index_prompt(blocks(WORDS * 30, "b"), "d"), rule, 6601.0 + 3000).read
        == 0
    )


def test_anthropic_writes_up_to_the_last_breakpoint_and_reads_the_longest_cached() -> None:
    cache = PromptCache(SETTINGS)
    ident = ("anthropic", "k", "claude")
    tools, system = WORDS * 100, WORDS * 300  # 400 and 1200 tokens
    first = blocks(tools, system, "question one", ttl={1: "5m"})
    p1 = index_prompt(first, "c")
    out = cache.breakpoints(ident, first, p1, 0.0)
    assert (out.read, out.write) == (0, 1600)

    second = blocks(tools, system, "question two", ttl={1: "5m"})
    out = cache.breakpoints(ident, second, index_prompt(second, "c"), 10.0)
    assert (out.read, out.write) == (1600, 0)

    # A new breakpoint after the cached one: read the cached part, write the rest.
    third = blocks(tools, system, WORDS * 200, ttl={1: "5m", 2: "5m"})
    out = cache.breakpoints(ident, third, index_prompt(third, "c"), 20.0)
    assert (out.read, out.write) == (1600, 800)


def test_anthropic_breakpoints_below_the_minimum_write_nothing() -> None:
    cache = PromptCache(SETTINGS)
    ident = ("anthropic", "k", "claude")
    small = blocks(WORDS * 200, "hi", ttl={0: "5m"})
    for now in (0.0, 1.0):
        out = cache.breakpoints(ident, small, index_prompt(small, "c"), now)
        assert (out.read, out.write) == (0, 0)
    none = blocks(WORDS * 400, "hi")
    assert cache.breakpoints(ident, none, index_prompt(none, "c"), 2.0).write == 0


def test_anthropic_lookback_finds_the_previous_turns_breakpoint() -> None:
    """The usual agent pattern: cache_control on the last message every turn."""
    cache = PromptCache(SETTINGS)
    ident = ("anthropic", "k", "claude")
    history = [WORDS * 300, "answer one", "question two"]
    turn1 = blocks(*history[:1], ttl={0: "5m"})
    cache.breakpoints(ident, turn1, index_prompt(turn1, "c"), 0.0)
    turn2 = blocks(*history, ttl={2: "5m"})
    p2 = index_prompt(turn2, "c")
    out = cache.breakpoints(ident, turn2, p2, 1.0)
    assert out.read == 1200
    assert out.write == p2.total - 1200

    far = blocks(WORDS * 300, *[f"filler {i}" for i in range(25)], ttl={25: "5m"})
    out = cache.breakpoints(ident, far, index_prompt(far, "c"), 2.0)
    assert out.read == 0  # the cached prefix is more than 20 blocks back


def test_anthropic_one_hour_breakpoints_outlive_five_minute_ones() -> None:
    cache = PromptCache(SETTINGS)
    ident = ("anthropic", "k", "claude")
    long_lived = blocks(WORDS * 300, WORDS * 300, ttl={0: "1h", 1: "5m"})
    out = cache.breakpoints(ident, long_lived, index_prompt(long_lived, "c"), 0.0)
    assert (out.write, out.write_1h) == (2400, 1200)
    out = cache.breakpoints(ident, long_lived, index_prompt(long_lived, "c"), 1000.0)
    assert (out.read, out.write) == (1200, 1200)


def test_memory_stays_bounded() -> None:
    settings = SimSettings(max_cache_entries_per_identity=50)
    cache = PromptCache(settings)
    rule = automatic_rule("deepseek", settings)
    for i in range(20):
        cache.automatic(
            ("deepseek", "k", "d"), index_prompt(blocks(f"s{i}" + WORDS * 400), "d"), rule, float(i)
        )
    assert cache.entry_count() <= 50
    assert UNIT == 64


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["alpha ", "beta, ", "\u00e9t\u00e9\n", "{x} "]),
            st.integers(0, 90),
            st.booleans(),
        ),
        min_size=1,
        max_size=6,
    ),
    st.integers(0, 5),
)
def test_remembered_block_indexes_equal_a_fresh_index(
    spec: list[tuple[str, int, bool]], cut: int
) -> None:
    """The per-block memo (agents resend their history) gives exactly the index a
    fresh walk gives, whatever block a conversation shares and where it starts."""
    made = [
        PromptBlock("<|img|>", opaque_tokens=IMAGE_TOKENS) if opaque else PromptBlock(word * n)
        for word, n, opaque in spec
    ]
    shared = index_prompt(made[: cut % len(made)] + made, "m")  # fills the memo
    prompt.clear_block_memo()
    fresh = index_prompt(made[: cut % len(made)] + made, "m")
    assert (shared.total, shared.block_ends, shared.digest) == (
        fresh.total,
        fresh.block_ends,
        fresh.digest,
    )
    assert shared.hashes == fresh.hashes
    again = index_prompt(made, "m")  # the same blocks at another position
    prompt.clear_block_memo()
    assert again.hashes == index_prompt(made, "m").hashes
