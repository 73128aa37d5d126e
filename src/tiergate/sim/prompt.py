"""The simulator's own neutral view of a request, and prompt-prefix hashing.

Each wire format (openai_wire, anthropic_wire, gemini_wire) parses its body
into a `SimCall`. The prompt is a list of `PromptBlock`s in the order
providers cache it: tools, then system, then messages. Every block is
tokenized on its own, so appending messages never changes the tokens of the
earlier blocks: exactly the property prefix caching depends on.

`index_prompt` walks the blocks once and records a chained hash of the token
prefix at every "cut point" (every block end and every multiple of `UNIT`
tokens). Two prompts have equal hashes at position p exactly when their first
p tokens, and the block structure around them, are equal. The cache stores
these hashes instead of token lists, so its memory is one int per cut point.
"""

from __future__ import annotations

import hashlib
from array import array
from dataclasses import dataclass, field
from typing import Any, Literal

from tiergate.core.tokens import token_end_offsets

UNIT = 64
"""Granularity of the prefix hash chain: divides OpenAI's 128 and DeepSeek's 64."""

IMAGE_TOKENS = 256
"""Tokens charged for one image, audio clip or document, whatever its size."""

Provider = Literal["openai", "deepseek", "anthropic", "gemini"]
TurnKind = Literal["user", "tool_result", "assistant"]


class SimRequestError(Exception):
    """The request is invalid; rendered as a 4xx in the caller's wire format."""

    def __init__(
        self, status: int, message: str, *, param: str | None = None, code: str | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param
        self.code = code


@dataclass(slots=True)
class PromptBlock:
    """One cacheable unit of the prompt: a tool, a system block, a content block,
    or a message's role marker (`marker=True`, not a content block)."""

    text: str
    cache_ttl: str | None = None
    """Anthropic `cache_control` on this block: "5m" or "1h"; None = no breakpoint."""
    opaque_tokens: int = 0
    """> 0 for an image or document: counted as this many tokens, identified by `text`."""
    marker: bool = False

    def token_ends(self) -> array[int] | list[int]:
        if self.opaque_tokens:
            return [len(self.text)] * self.opaque_tokens
        return token_end_offsets(self.text)


@dataclass(slots=True)
class ToolDef:
    name: str
    description: str = ""
    schema: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class SimCall:
    """A parsed request, whatever format it came in."""

    provider: Provider
    model: str
    blocks: list[PromptBlock]
    tools: list[ToolDef] = field(default_factory=list)
    last_turn: TurnKind = "user"
    directive_text: str = ""
    """Text of the latest user-authored message: where `[[sim:...]]` directives live."""
    max_tokens: int | None = None
    stream: bool = False
    include_usage: bool = False
    tool_choice: str = "auto"
    """"auto", "none", "required", or the name of a tool that must be called."""
    parallel_tools: bool = True
    thinking: bool = False
    """The request asked for reasoning (Anthropic `thinking`, deepseek-reasoner)."""
    can_think: bool = False
    """The format can carry reasoning back (Anthropic, DeepSeek's reasoning_content)."""
    json_schema: dict[str, Any] | None = None
    json_mode: bool = False
    cache_ttl_seconds: float | None = None
    """OpenAI `prompt_cache_retention` override of the idle window."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Format-specific facts the renderer needs (e.g. Gemini's `alt`)."""


@dataclass(slots=True)
class PromptIndex:
    total: int
    block_ends: list[int]
    """Token position just after each block, aligned with `SimCall.blocks`."""
    hashes: dict[int, int]
    """Prefix hash at every cut point: every block end and every multiple of UNIT."""
    digest: bytes
    """Stable hash of the whole prompt: seeds the deterministic reply."""


@dataclass(frozen=True, slots=True)
class _BlockIndex:
    """What indexing one block adds, given the chain and position it starts at."""

    tokens: int
    cuts: tuple[tuple[int, int], ...]  #: (tokens from the block's start, chain hash)
    chain: int  #: the chain after the block


#: Blocks whose indexing is remembered, and the characters they may hold together.
#: Why: agents resend the whole history every turn, so at 100 KB the simulator
#: re-tokenized and re-hashed every earlier message of every request (about 1 ms
#: of its CPU each: in the gateway's throughput bench it, not the gateway, was the
#: bottleneck). A block's result depends only on its text, its opaque token count,
#: the chain it starts from and its offset in the UNIT grid: the memo's key.
_BLOCK_MEMO_CHARS = 32_000_000
_block_memo: dict[tuple[int, int, str, int], _BlockIndex] = {}
_block_memo_chars = 0


def clear_block_memo() -> None:
    """Forget every remembered block index (tests compare against a fresh walk)."""
    global _block_memo_chars
    _block_memo.clear()
    _block_memo_chars = 0


def _index_block(block: PromptBlock, chain: int, pos: int) -> _BlockIndex:
    global _block_memo_chars
    text = block.text
    key = (chain, pos % UNIT, text, block.opaque_tokens)
    held = _block_memo.get(key)
    if held is not None:
        return held
    ends = block.token_ends()
    n = len(ends)
    cuts: list[tuple[int, int]] = []
    char_start = 0
    cut = (pos // UNIT + 1) * UNIT
    while cut < pos + n:
        char_end = ends[cut - pos - 1]
        chain = hash((chain, text[char_start:char_end]))
        cuts.append((cut - pos, chain))
        char_start = char_end
        cut += UNIT
    # The block end is a cut point too; the flag keeps "ab"+"c" apart from "abc".
    chain = hash((chain, text[char_start:], True))
    out = _BlockIndex(n, tuple(cuts), chain)
    if _block_memo_chars + len(text) > _BLOCK_MEMO_CHARS:
        clear_block_memo()  # a simulator's memo: starting over is simpler than LRU order
    _block_memo[key] = out
    _block_memo_chars += len(text)
    return out


def index_prompt(blocks: list[PromptBlock], model: str) -> PromptIndex:
    """Count the prompt's tokens and hash its prefixes at every cut point."""
    digest = hashlib.blake2b(model.encode(), digest_size=16)
    hashes: dict[int, int] = {}
    block_ends: list[int] = []
    chain = 0
    pos = 0
    for block in blocks:
        digest.update(block.text.encode("utf-8", "surrogatepass"))
        digest.update(b"\x1e" if not block.opaque_tokens else b"\x1f")
        indexed = _index_block(block, chain, pos)
        for offset, value in indexed.cuts:
            hashes[pos + offset] = value
        chain = indexed.chain
        pos += indexed.tokens
        hashes[pos] = chain
        block_ends.append(pos)
    return PromptIndex(total=pos, block_ends=block_ends, hashes=hashes, digest=digest.digest())
