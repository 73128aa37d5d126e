"""A deterministic tokenizer approximation shared by the gateway and the simulator.

Real tokenizers (tiktoken, SentencePiece) are model-specific, large and slow to
load; the gateway only needs token counts that are stable, cheap and close
enough to price and score a request, and the provider simulator needs a token
sequence whose prefixes behave like real ones for prompt caching. So tiergate
defines its own tokenizer, one regular expression where every match is a token:

- an ASCII word of up to 7 letters, with its leading space (" the", " routing"
  and "Hello" are one token each; longer words split every 7 letters);
- a newline followed by up to 16 spaces/tabs of indentation, or up to 16 other
  whitespace characters;
- a run of up to 3 punctuation characters with an optional leading space
  (" {", "):", "!=");
- up to 3 digits ("2026" is "202" + "6", as in cl100k);
- a non-ASCII word of up to 6 letters with its leading space;
- one CJK ideograph, kana or hangul syllable (about one token each in real
  tokenizers);
- a run of underscores.

On English prose and on source code this gives about 4 characters per token,
the ratio providers quote. Concatenating the tokens gives back the text
exactly, and the tokens of a text never depend on what follows it beyond the
current token, so a prompt's token sequence is prefix-stable when it grows.

`count_tokens` is on the gateway's hot path (the difficulty scorer counts the
whole transcript on every request). Multi-turn traffic re-sends the same long
messages every turn, so counts and token offsets of long texts are memoised in
a small LRU bounded by total characters.
"""

from __future__ import annotations

import re
import threading
from array import array
from collections import OrderedDict
from itertools import accumulate
from typing import Generic, TypeVar

__all__ = ["count_tokens", "token_end_offsets", "tokenize"]

_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"

# Alternatives are ordered by how often they match in typical prompts: the regex
# engine tries them left to right at every position.
_TOKEN_RE = re.compile(
    r" ?[A-Za-z]{1,7}"
    r"|\n?[ \t]{1,16}"
    r"|\s{1,16}"
    r"| ?[^\w\s]{1,3}"
    r"|\d{1,3}"
    rf"| ?[^\W\d_{_CJK}]{{1,6}}"
    rf"|[{_CJK}]"
    r"|_{1,16}"
)

# Texts shorter than this are counted directly: hashing them for the memo
# costs about as much as tokenizing them.
_MEMO_MIN_CHARS = 1024
_MEMO_MAX_CHARS = 16_000_000

V = TypeVar("V")


class _CharBoundedLru(Generic[V]):
    """An LRU keyed by text whose budget is the total length of the keys held.

    Bounded by characters, not entries, because one tool output can be
    megabytes while a typical message is a few hundred characters.
    """

    def __init__(self, max_chars: int) -> None:
        self._max_chars = max_chars
        self._chars = 0
        self._items: OrderedDict[str, V] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, text: str) -> V | None:
        with self._lock:
            value = self._items.get(text)
            if value is not None:
                self._items.move_to_end(text)
            return value

    def put(self, text: str, value: V) -> None:
        if len(text) > self._max_chars // 4:
            return
        with self._lock:
            if text in self._items:
                return
            self._items[text] = value
            self._chars += len(text)
            while self._chars > self._max_chars:
                old, _ = self._items.popitem(last=False)
                self._chars -= len(old)


_count_memo: _CharBoundedLru[int] = _CharBoundedLru(_MEMO_MAX_CHARS)
_offsets_memo: _CharBoundedLru[array[int]] = _CharBoundedLru(_MEMO_MAX_CHARS)


def tokenize(text: str) -> list[str]:
    """Split `text` into tokens; `"".join(tokenize(text)) == text`."""
    return _TOKEN_RE.findall(text)


def count_tokens(text: str) -> int:
    """Number of tokens in `text`, equal to `len(tokenize(text))`."""
    if len(text) < _MEMO_MIN_CHARS:
        return len(_TOKEN_RE.findall(text))
    cached = _count_memo.get(text)
    if cached is not None:
        return cached
    count = len(_TOKEN_RE.findall(text))
    _count_memo.put(text, count)
    return count


def token_end_offsets(text: str) -> array[int]:
    """End offset (in characters) of each token of `text`, in order.

    The compact form of a token sequence: token i is
    `text[ends[i-1]:ends[i]]`. The simulator hashes prompt prefixes from it
    without keeping a Python string per token.
    """
    if len(text) >= _MEMO_MIN_CHARS:
        cached = _offsets_memo.get(text)
        if cached is not None:
            return cached
    ends = array("I", accumulate(map(len, _TOKEN_RE.findall(text))))
    if len(text) >= _MEMO_MIN_CHARS:
        _offsets_memo.put(text, ends)
    return ends
