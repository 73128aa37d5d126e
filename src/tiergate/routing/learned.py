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
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from tiergate.core.model import ChatRequest

ARTIFACT_PATH = Path(__file__).parent / "artifacts" / "request_scorer_v1.json"
FEATURE_VERSION = 1
"""Bumped whenever `ask_features` changes: an artifact built for another version is refused."""

ASK_CHARS = 4000
"""The ask is read up to this many characters (head 3000, tail 1000): the cost stays
bounded however long a pasted document is, and both the framing and the final
question are kept."""

_TOKEN = re.compile(r"[A-Za-z]+|\d+|[^\w\s]")
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


def ask_features(ask: str, prompt_chars: int | None = None) -> set[str]:
    """The binary features of one ask (and the whole prompt's size, when it differs)."""
    if len(ask) > ASK_CHARS:
        ask = ask[:3000] + "\n" + ask[-1000:]
    feats: set[str] = set()
    tokens = _TOKEN.findall(ask)
    prev = "<s>"
    for tok in tokens:
        if tok.isdigit():
            word = tok if len(tok) <= 2 else f"#{min(len(tok), 6)}"
        else:
            word = tok.lower()
            if len(tok) >= 2 and tok.isupper() and tok.isalpha():
                feats.add("C:" + tok)
        feats.add("w:" + word)
        feats.add(f"b:{prev} {word}")
        prev = word
    if tokens:
        first = tokens[0]
        feats.add("first:" + (first.lower() if first.isalpha() else "#"))
    lines = ask.count("\n") + 1
    options = _OPTION.findall(ask)
    feats.add(f"len:{_bucket(len(ask))}")
    feats.add(f"words:{_bucket(len(tokens))}")
    feats.add(f"lines:{_bucket(lines)}")
    feats.add(f"opts:{min(len(options), 6)}")
    if options:
        first_option = _OPTION.search(ask)
        stem = ask[: first_option.start()] if first_option else ask
        feats.add(f"stem:{_bucket(len(stem))}")
        feats.add(f"optlen:{_bucket((len(ask) - len(stem)) / len(options))}")
    digits = sum(ch.isdigit() for ch in ask)
    feats.add(f"digits:{_bucket(digits)}")
    feats.add(f"arith:{min(_bucket(len(_ARITH.findall(ask))), 4)}")
    feats.add(f"eq:{min(_bucket(len(_EQUATION.findall(ask))), 4)}")
    if _LATEX.search(ask):
        feats.add("latex")
    code_lines = sum(1 for line in ask.splitlines() if _CODE_LINE.search(line))
    feats.add(f"code:{min(_bucket(code_lines), 5)}")
    if prompt_chars is not None and prompt_chars > len(ask) * 1.2:
        feats.add(f"prompt:{_bucket(prompt_chars)}")
    return feats


def latest_ask(req: ChatRequest) -> str:
    """The latest user message's text ('' when there is none)."""
    for message in reversed(req.messages):
        if message.role == "user":
            return message.text()
    return ""


@dataclass(frozen=True, slots=True)
class RequestScorer:
    """A trained model: feature weights, bias, and the training logits' quantiles."""

    version: str
    bias: float
    weights: dict[str, float]
    quantiles: tuple[float, ...]  # ascending logits at evenly spaced training quantiles

    def logit(self, features: Iterable[str]) -> float:
        get = self.weights.get
        return self.bias + sum(get(f, 0.0) for f in features)

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
        return self.calibrate(self.logit(ask_features(ask, prompt_chars)))

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
