"""Lexical difficulty: the full-transcript scorer and the latest-turn delta extractor.

The score is a weighted linear combination of exactly six features (report §3.1),
each normalised by its cap to [0, 1]; the weights sum to 1, so scores are in [0, 1]:

    LogPromptTokens     0.20  cap log(8001)   log(1 + prompt tokens)
    ReasoningCueCount   0.15  cap 5           matches of REASONING_CUES
    SystemPromptLogLen  0.10  cap log(2001)   log(1 + system prompt characters)
    CodeKeywordDensity  0.20  cap 5.0         CODE_* vocabulary matches per 100 chars
    HasTools            0.15  0/1             tools declared or tool results present
    MathMarkerCount     0.20  cap 5           MATH_SYMBOLS / MATH_WORDS matches

Two scopes (report §3.2). `full_transcript_features` reads the whole request: its
token term grows with conversation length, so a long trivial session drifts upward.
`delta_features` reads only the latest turn (new user text plus tool results after
the last assistant message) and zeroes SystemPromptLogLen, which is not part of a
turn; its cost depends on the size of the latest turn, never on the history.

Cost: each text goes through the fixed, precompiled scans of routing.lexicon
(linear in its length, head and tail only past 32 KB), and its counts are
memoised, so a resent history costs a hash per message; see
bench/bench_difficulty.py. No I/O. The system prompt feeds only the token and
SystemPromptLogLen terms: it is constant per session, so letting its wording fire
the cue terms would only add another length-independent floor.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass

from tiergate.core.model import ChatRequest, Message

# the vocabularies and their counts (routing.lexicon), re-exported as part of the score
from tiergate.routing.lexicon import (
    CODE_IDENTIFIER_SHAPES,
    CODE_KEYWORDS,
    CODE_SYNTAX,
    HIT_SPACING,
    MATH_SYMBOLS,
    MATH_WORDS,
    REASONING_CUES,
    code_keyword_count,
    lexical_counts,
    math_marker_count,
    reasoning_cue_count,
)
from tiergate.routing.observations import latest_turn_bounds
from tiergate.routing.task_message import ask_text


def count_tokens(text: str) -> int:
    """Fast token estimate: ceil(chars / 4).

    A local approximation (about 4 characters per token for English and code) kept
    behind one function so a real tokenizer can be swapped in without touching the
    scorer; the LogPromptTokens term is logarithmic, so a 20 % counting error moves
    the score by at most ~0.005.
    """
    return (len(text) + 3) // 4


# ---- weights and caps (report §3.1; do not retune without re-running replay) -------


@dataclass(frozen=True, slots=True)
class FeatureSpec:
    name: str
    weight: float
    cap: float


LOG_PROMPT_TOKENS = FeatureSpec("log_prompt_tokens", 0.20, math.log(8001))
REASONING_CUE_COUNT = FeatureSpec("reasoning_cue_count", 0.15, 5.0)
SYSTEM_PROMPT_LOG_LEN = FeatureSpec("system_prompt_log_len", 0.10, math.log(2001))
CODE_KEYWORD_DENSITY = FeatureSpec("code_keyword_density", 0.20, 5.0)
HAS_TOOLS = FeatureSpec("has_tools", 0.15, 1.0)
MATH_MARKER_COUNT = FeatureSpec("math_marker_count", 0.20, 5.0)

FEATURE_SPECS: tuple[FeatureSpec, ...] = (
    LOG_PROMPT_TOKENS,
    REASONING_CUE_COUNT,
    SYSTEM_PROMPT_LOG_LEN,
    CODE_KEYWORD_DENSITY,
    HAS_TOOLS,
    MATH_MARKER_COUNT,
)
"""The six features in vector order, with the report's weights and caps."""

DENSITY_MIN_CHARS = 200
"""Denominator floor for CodeKeywordDensity. A per-100-character density of a
40-character message is noise (one identifier would read as 2.5/100); below 200
characters the matches are divided by 200 instead, so short turns need several
code tokens before the term moves."""


__all__ = [
    "CODE_IDENTIFIER_SHAPES",
    "CODE_KEYWORDS",
    "CODE_SYNTAX",
    "HIT_SPACING",
    "MATH_SYMBOLS",
    "MATH_WORDS",
    "REASONING_CUES",
    "code_keyword_count",
    "lexical_counts",
    "math_marker_count",
    "reasoning_cue_count",
]


# ---- features ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DifficultyFeatures:
    """The six raw features of one scope, plus the token count behind the first.

    Raw values are kept (not just normalised ones) so audit records and the
    bandit can see, e.g., that a turn had 9 cues even though the term caps at 5.
    """

    log_prompt_tokens: float
    reasoning_cue_count: int
    system_prompt_log_len: float
    code_keyword_density: float
    has_tools: bool
    math_marker_count: int
    prompt_tokens: int = 0

    def raw(self) -> tuple[float, ...]:
        return (
            self.log_prompt_tokens,
            float(self.reasoning_cue_count),
            self.system_prompt_log_len,
            self.code_keyword_density,
            1.0 if self.has_tools else 0.0,
            float(self.math_marker_count),
        )

    @property
    def normalised(self) -> tuple[float, ...]:
        """Each feature divided by its cap and clipped to [0, 1], in FEATURE_SPECS order."""
        return tuple(
            min(max(v / s.cap, 0.0), 1.0) for v, s in zip(self.raw(), FEATURE_SPECS, strict=True)
        )


def score(features: DifficultyFeatures) -> float:
    """Weighted sum of the normalised features, in [0, 1]."""
    return sum(s.weight * v for s, v in zip(FEATURE_SPECS, features.normalised, strict=True))


TextCounts = tuple[int, int, int, int, int]
"""(tokens, scanned chars, cue matches, code matches, math markers) of one text."""

SCAN_WINDOW_CHARS = 16_384
"""A text longer than twice this is scanned at its head and tail only. A tool
result can be a multi-megabyte file read; scanning all of it would cost a
regex pass per megabyte on the request path. Tokens still count the whole text,
cue and math counts saturate at 5 long before 32 KB, and code density is a ratio
estimated over the scanned characters."""

SCAN_MEMO_LIMIT = 20_000
"""Texts whose counts are remembered (about 4 MB). Agents resend the whole history
every turn, so after the first request each old message costs one hash lookup
instead of a regex scan; the full-transcript score of a deep session then costs
about as much as hashing its text. Purely a cache: results are identical."""

_scan_memo: dict[tuple[int, int], TextCounts] = {}


def _scan_text(text: str) -> TextCounts:
    tokens = count_tokens(text)
    if len(text) > 2 * SCAN_WINDOW_CHARS:
        text = text[:SCAN_WINDOW_CHARS] + "\n" + text[-SCAN_WINDOW_CHARS:]
    cues, code, marks = lexical_counts(text)
    return (tokens, len(text), cues, code, marks)


def scan_text(text: str) -> TextCounts:
    """Counts of one text, memoised by (hash, length); oldest entries evicted first."""
    key = (hash(text), len(text))
    counts = _scan_memo.get(key)
    if counts is None:
        counts = _scan_text(text)
        if len(_scan_memo) >= SCAN_MEMO_LIMIT:
            # StopIteration/RuntimeError: emptied or resized by another thread meanwhile.
            with contextlib.suppress(StopIteration, RuntimeError):
                _scan_memo.pop(next(iter(_scan_memo)), None)
        _scan_memo[key] = counts
    return counts


def clear_scan_memo() -> None:
    """Forget memoised counts (benchmarks measure the cold path with this)."""
    _scan_memo.clear()


class Tally:
    """Sums text counts over one linear pass of a request's texts (or, in
    routing.transcript, over a session's messages so far)."""

    __slots__ = ("code", "cues", "math", "scanned", "tokens")

    def __init__(self) -> None:
        self.tokens = self.scanned = self.cues = self.code = self.math = 0

    def copy(self) -> Tally:
        other = Tally()
        other.tokens, other.scanned = self.tokens, self.scanned
        other.cues, other.code, other.math = self.cues, self.code, self.math
        return other

    def add(self, text: str) -> None:
        if not text:
            return
        tokens, scanned, cues, code, marks = scan_text(text)
        self.tokens += tokens
        self.scanned += scanned
        self.cues += cues
        self.code += code
        self.math += marks

    def features(self, system_chars: int, has_tools: bool) -> DifficultyFeatures:
        density = 100.0 * self.code / max(self.scanned, DENSITY_MIN_CHARS)
        return DifficultyFeatures(
            log_prompt_tokens=math.log1p(self.tokens),
            reasoning_cue_count=self.cues,
            system_prompt_log_len=math.log1p(system_chars),
            code_keyword_density=density,
            has_tools=has_tools,
            math_marker_count=self.math,
            prompt_tokens=self.tokens,
        )


def full_transcript_features(req: ChatRequest) -> DifficultyFeatures:
    """Features of the whole request: system prompt, every message, tool definitions.

    Tool-call arguments count (they are prompt text the model re-reads); tool
    schemas count only by name and description, a cheap stand-in for their size.
    """
    tally = Tally()
    system = req.system_text()
    tally.tokens += count_tokens(system)
    for spec in req.tools:
        tally.tokens += count_tokens(spec.name) + count_tokens(spec.description)
    has_tools = bool(req.tools)
    for m in req.messages:
        tally.add(m.text())
        for call in m.tool_calls:
            tally.add(call.arguments)
            has_tools = True
        if m.role == "tool":
            has_tools = True
    return tally.features(len(system), has_tools)


def latest_turn(req: ChatRequest) -> list[Message]:
    """The messages after the last assistant message, oldest first (a trailing
    prefill skipped; observations.latest_turn_bounds)."""
    start, end = latest_turn_bounds(req.messages)
    return req.messages[start:end]


def delta_features(req: ChatRequest) -> DifficultyFeatures:
    """Features of the latest turn only, with SystemPromptLogLen zeroed (report §3.2).

    HasTools keeps its meaning (the request declares tools, or the turn carries
    tool-protocol results), matching the report's 0.90 theoretical delta maximum.
    A text agent's command output (routing.observations) is its latest turn like
    any tool result, but does not set HasTools: a text agent declares no tools,
    so all its turns, asks and outputs alike, score without that term
    (docs/escalation.md, "Text-protocol agents", has the measurement).
    """
    tally = Tally()
    has_tools = bool(req.tools)
    for m in latest_turn(req):
        if m.role == "system":
            continue  # an instruction the client injected, not the user's ask
        # a user message's harness blocks (CLAUDE.md, environment) are not the ask
        tally.add(ask_text(m.text()) if m.role == "user" else m.text())
        if m.role == "tool":
            has_tools = True
    return tally.features(0, has_tools)  # log1p(0) == 0: SystemPromptLogLen zeroed


def full_score(req: ChatRequest) -> float:
    return score(full_transcript_features(req))


def delta_score(req: ChatRequest) -> float:
    return score(delta_features(req))


def describe(features: DifficultyFeatures) -> dict[str, float]:
    """Per-feature weighted contributions, for audit records and debugging."""
    return {
        s.name: round(s.weight * v, 4)
        for s, v in zip(FEATURE_SPECS, features.normalised, strict=True)
    }
