"""The learned request scorer: how likely a request is to need the strong model.

The lexical difficulty score (routing.difficulty) counts a hand-picked vocabulary;
on single questions it is no better than prompt length (docs/request-level-benchmarks.md).
This scorer is a logistic model over sparse binary features of the *ask* (the
latest user message) that a training run chose, not a person:

- word unigrams and bigrams and ALL-CAPS words ("NOT", "EXCEPT"), kept only when
  they occur across several training subjects, so they carry meaning beyond one
  topic;
- the structure of the ask: its length, line count, multiple-choice options and
  their length, the stem's length, the first word;
- maths and code found by shape rather than by keyword: arithmetic expressions,
  LaTeX, equations, code-like lines (indentation, brackets, statement endings).

The weights live in a versioned JSON artifact (artifacts/request_scorer_v1.json,
built by eval/train_request_scorer.py). The raw logit is mapped through the
training prompts' logit quantiles, so the score is the share of training prompts
scoring lower: uniform on training-like traffic, and a threshold t sends about
1 - t of such traffic above it. Pure Python at request time: one regex pass over
at most ASK_CHARS characters and one dict lookup per feature.
"""

from __future__ import annotations

import bisect
import json
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from tiergate.core.model import ChatRequest
from tiergate.routing.task_message import ask_text

ARTIFACT_PATH = Path(__file__).parent / "artifacts" / "request_scorer_v1.json"
FEATURE_VERSION = 1
"""Bumped whenever `ask_features` changes: an artifact built for another version is refused."""

ASK_CHARS = 4000
"""The ask is read up to this many characters (head 3000, tail 1000): the cost stays
bounded however long a pasted document is, and both the framing and the final
question are kept."""

_TOKEN_LOWER = re.compile(r"[a-z]+|\d+|[^\w\s]")  # on the lowercased ask
_CAPS = re.compile(r"(?<![A-Za-z])[A-Z]{2,}(?![A-Za-z])")
_TWO_CAPS = re.compile(r"[A-Z][A-Z]")  # cheap: no ALL-CAPS word without it
_DIGIT = re.compile(r"\d")
_CODE_STARTS = ("def", "class", "return", "import", "#include")
_OPTION = re.compile(r"^\s*\(?[A-Ja-j][.)]\s", re.MULTILINE)
_ARITH = re.compile(r"\d\s*[-+*/^=<>]\s*\(?\d")
_LATEX = re.compile(r"\\[a-z]+\{|\$[^$\n]+\$")
_EQUATION = re.compile(r"\b[a-z]\s*(?:\^|\*\*)\s*\d|\b[a-z]\s*=\s*[-\d(]")
_CODE_LINE = re.compile(
    r"^(?:\s{2,}|\t)\S|[;{}]\s*$|^\s*(?:def|class|return|import|#include)\b|\w\(.*\)\s*[:{]?\s*$"
)


def _bucket(value: float) -> int:
    """log2 bucket: 0, 1, 2-3, 4-7, ... so the linear model can bend with size."""
    return 0 if value <= 0 else int(math.log2(value)) + 1


def _count_digits(text: str) -> int:
    if text.isascii():
        return sum(map(text.count, "0123456789"))
    return len(_DIGIT.findall(text))


def _may_be_code(line: str) -> bool:
    """False only for lines `_CODE_LINE` cannot match: no leading whitespace, no
    statement keyword first, and no ; { } ) : at the end."""
    if line[:1].isspace():
        return True
    end = line.rstrip()[-1:]
    return end in (";", "{", "}", ")", ":") or line.startswith(_CODE_STARTS)


def _number(token: str) -> str:
    return token if len(token) <= 2 else f"#{min(len(token), 6)}"


def ask_features(ask: str, prompt_chars: int | None = None) -> set[str]:
    """The binary features of one ask (and the whole prompt's size, when it differs).

    The reference definition, used by training; `RequestScorer.fast_logit` computes
    the same sum without building the word features.
    """
    if len(ask) > ASK_CHARS:
        ask = ask[:3000] + "\n" + ask[-1000:]
    tokens = [_number(t) if t[0].isdigit() else t for t in _TOKEN_LOWER.findall(ask.lower())]
    feats = {"w:" + t for t in tokens}
    feats.update(f"b:{a} {b}" for a, b in zip(["<s>", *tokens], tokens, strict=False))
    if _TWO_CAPS.search(ask):
        feats.update("C:" + c for c in _CAPS.findall(ask))
    feats.update(_shape_features(ask, tokens, prompt_chars))
    return feats


def _shape_features(ask: str, tokens: list[str], prompt_chars: int | None) -> list[str]:
    """Size, layout, options, maths and code of an (already truncated) ask."""
    feats = []
    if tokens:
        feats.append("first:" + (tokens[0] if tokens[0].isalpha() else "#"))
    options = _OPTION.findall(ask)
    feats.append(f"len:{_bucket(len(ask))}")
    feats.append(f"words:{_bucket(len(tokens))}")
    feats.append(f"lines:{_bucket(ask.count(chr(10)) + 1)}")
    feats.append(f"opts:{min(len(options), 6)}")
    if options:
        first_option = _OPTION.search(ask)
        stem = ask[: first_option.start()] if first_option else ask
        feats.append(f"stem:{_bucket(len(stem))}")
        feats.append(f"optlen:{_bucket((len(ask) - len(stem)) / len(options))}")
    # Each regex runs only where it can match (exact prefilters: the same counts, at
    # a fraction of the cost on ordinary prose).
    digits = _count_digits(ask)
    feats.append(f"digits:{_bucket(digits)}")
    arith = len(_ARITH.findall(ask)) if digits else 0
    feats.append(f"arith:{min(_bucket(arith), 4)}")
    equations = len(_EQUATION.findall(ask)) if "=" in ask or "^" in ask or "**" in ask else 0
    feats.append(f"eq:{min(_bucket(equations), 4)}")
    if ("\\" in ask or "$" in ask) and _LATEX.search(ask):
        feats.append("latex")
    code_lines = sum(
        1 for line in ask.splitlines() if _may_be_code(line) and _CODE_LINE.search(line)
    )
    feats.append(f"code:{min(_bucket(code_lines), 5)}")
    if prompt_chars is not None and prompt_chars > len(ask) * 1.2:
        feats.append(f"prompt:{_bucket(prompt_chars)}")
    return feats


def latest_ask(req: ChatRequest) -> str:
    """The latest user message's own words ('' when there is none): agent-harness
    blocks at its start (Claude Code's `<system-reminder>`, Codex's environment
    context) are not the ask the scorer was trained on (routing.task_message)."""
    for message in reversed(req.messages):
        if message.role == "user":
            return ask_text(message.text())
    return ""


@dataclass(frozen=True, slots=True)
class RequestScorer:
    """A trained model: feature weights, bias, and the training logits' quantiles."""

    version: str
    bias: float
    weights: dict[str, float]
    quantiles: tuple[float, ...]  # ascending logits at evenly spaced training quantiles
    _unigrams: dict[str, float] = field(default_factory=dict, repr=False, compare=False)
    _bigrams: dict[tuple[str, str], float] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        """Split word weights into per-kind maps keyed by the bare token(s), so the hot
        path looks tokens up without building a feature string for each."""
        for name, w in self.weights.items():
            kind, _, rest = name.partition(":")
            if kind == "w":
                self._unigrams[rest] = w
            elif kind == "b" and " " in rest:
                a, b = rest.split(" ", 1)
                self._bigrams[(a, b)] = w

    def logit(self, features: Iterable[str]) -> float:
        get = self.weights.get
        return self.bias + sum(get(f, 0.0) for f in features)

    def fast_logit(self, ask: str, prompt_chars: int | None = None) -> float:
        """`logit(ask_features(ask, prompt_chars))`, without materialising the word
        features: the same tokens, looked up in the per-kind maps."""
        if len(ask) > ASK_CHARS:
            ask = ask[:3000] + "\n" + ask[-1000:]
        tokens = [_number(t) if t[0].isdigit() else t for t in _TOKEN_LOWER.findall(ask.lower())]
        uni, bi = self._unigrams.get, self._bigrams.get
        total = sum(uni(t, 0.0) for t in set(tokens))
        total += sum(bi(p, 0.0) for p in set(zip(["<s>", *tokens], tokens, strict=False)))
        get = self.weights.get
        if _TWO_CAPS.search(ask):
            total += sum(get("C:" + c, 0.0) for c in set(_CAPS.findall(ask)))
        total += sum(get(f, 0.0) for f in _shape_features(ask, tokens, prompt_chars))
        return self.bias + total

    def calibrate(self, logit: float) -> float:
        """The share of training prompts with a lower logit, interpolated, in [0, 1]."""
        q = self.quantiles
        i = bisect.bisect_left(q, logit)
        if i <= 0:
            return 0.0
        if i >= len(q):
            return 1.0
        lo, hi = q[i - 1], q[i]
        frac = 0.0 if hi <= lo else (logit - lo) / (hi - lo)
        return (i - 1 + frac) / (len(q) - 1)

    def score_text(self, ask: str, prompt_chars: int | None = None) -> float:
        return self.calibrate(self.fast_logit(ask, prompt_chars))

    def score(self, req: ChatRequest, prompt_chars: int | None = None) -> float:
        """The learned score of a request's latest ask."""
        return self.score_text(latest_ask(req), prompt_chars)

    def to_json(self) -> dict[str, object]:
        return {
            "version": self.version,
            "feature_version": FEATURE_VERSION,
            "bias": self.bias,
            "quantiles": list(self.quantiles),
            "weights": self.weights,
        }

    @classmethod
    def from_json(cls, data: dict[str, object]) -> RequestScorer:
        if data.get("feature_version") != FEATURE_VERSION:
            raise ValueError(
                f"request scorer artifact has feature_version {data.get('feature_version')!r}, "
                f"this code computes version {FEATURE_VERSION}: rebuild it "
                "(python -m eval.train_request_scorer)"
            )
        weights = data["weights"]
        quantiles = data["quantiles"]
        if not isinstance(weights, dict) or not isinstance(quantiles, list):
            raise ValueError("request scorer artifact: weights must be a map, quantiles a list")
        return cls(
            version=str(data["version"]),
            bias=float(data["bias"]),  # type: ignore[arg-type]
            weights={str(k): float(v) for k, v in weights.items()},
            quantiles=tuple(float(v) for v in quantiles),
        )


@lru_cache(maxsize=4)
def load_scorer(path: Path = ARTIFACT_PATH) -> RequestScorer:
    """The shipped scorer, read once per process."""
    with path.open(encoding="utf-8") as fh:
        return RequestScorer.from_json(json.load(fh))
