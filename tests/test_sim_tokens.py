"""The shared tokenizer approximation: lossless, consistent, prefix-stable, ~4 chars/token."""

from __future__ import annotations

import inspect
import json

from hypothesis import given, settings
from hypothesis import strategies as st

from tiergate.core.tokens import count_tokens, token_end_offsets, tokenize

ENGLISH = (
    "Prompt caching changed the economics of routing. Once continuity is worth a tenfold "
    "discount on most of your input tokens, a router must pin, and the moment it pins it "
    "decides on the turn where it knows least. "
) * 40
CODE = inspect.getsource(json.decoder)


@settings(max_examples=200)
@given(st.text())
def test_tokens_join_back_to_the_text_and_counts_agree(text: str) -> None:
    tokens = tokenize(text)
    assert "".join(tokens) == text
    assert all(tokens)
    assert count_tokens(text) == len(tokens)
    ends = token_end_offsets(text)
    assert list(ends) == [sum(len(t) for t in tokens[: i + 1]) for i in range(len(tokens))]


@settings(max_examples=100)
@given(st.text(), st.text())
def test_appending_text_keeps_all_but_the_last_token(head: str, tail: str) -> None:
    before = tokenize(head)
    after = tokenize(head + tail)
    assert after[: max(0, len(before) - 1)] == before[: max(0, len(before) - 1)]


def test_about_four_characters_per_token_for_prose_and_code() -> None:
    for text in (ENGLISH, CODE):
        ratio = len(text) / count_tokens(text)
        assert 3.2 <= ratio <= 5.0, ratio


def test_cjk_is_about_one_token_per_character() -> None:
    text = "日本語のテキストです"
    assert count_tokens(text) == len(text)


def test_memoised_long_text_gives_the_same_answers() -> None:
    text = ENGLISH * 3
    assert len(text) > 1024
    first = count_tokens(text)
    assert count_tokens(text) == first == len(tokenize(text))
    assert list(token_end_offsets(text)) == list(token_end_offsets(text))
    assert token_end_offsets(text)[-1] == len(text)


def test_examples() -> None:
    assert tokenize("Hello world, 2026!") == ["Hello", " world", ",", " ", "202", "6", "!"]
    assert tokenize("def f(x):\n    return x") == [
        "def",
        " f",
        "(",
        "x",
        "):",
        "\n    ",
        "return",
        " x",
    ]
    assert count_tokens("") == 0
