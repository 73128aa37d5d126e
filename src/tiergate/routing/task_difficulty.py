"""How hard the task of a session reads, from its text alone (issue #15).

The human fix-time label of a SWE-bench task is a property of the issue, and
every agent session starts with the issue as its first user message. This
model reads that message once per session (routing.transcript, through
session_scorer.task_text) and returns a score in 0..1, higher for tasks that
humans estimated at an hour or more: an ordinal logistic regression on

- hashed word unigrams and bigrams (lower-cased identifiers and words, each
  n-gram present or not, `buckets` hash buckets by CRC-32, the vector scaled
  to unit length so long texts do not weigh more), and
- shape counts (`SHAPE_NAMES`): length, lines, code fences, traceback,
  file paths, dotted names, error names, code-looking lines, URLs.

Trained offline by eval/train_task_difficulty.py on public SWE-bench issue
texts (docs/task-difficulty.md: data, licence, split, AUROCs) and shipped as
a versioned JSON artifact (artifacts/task_difficulty_v1.json) that stores only
the non-zero hashed weights, rounded. Cost: one pass over at most
`CHAR_LIMIT` characters and `TOKEN_LIMIT` words, a few regex scans, a sparse
dot product; pure Python, no I/O after the artifact is loaded (once, lazily).
"""

from __future__ import annotations

import functools
import itertools
import json
import math
import re
import zlib
from dataclasses import dataclass
from importlib import resources
from typing import Any

ARTIFACT = "task_difficulty_v1.json"
#: Characters of the task text read (the session scorer's TASK_CHAR_LIMIT).
CHAR_LIMIT = 32_000
#: Words hashed into n-grams (bounds the per-session cost).
TOKEN_LIMIT = 6_000

_WORD = re.compile(r"[a-z_][a-z0-9_]{1,40}")
_FILE = re.compile(r"[\w./-]+\.(?:py|pyx|c|h|js|ts|rst|txt|cfg|toml|ini|yml|yaml|json|html)\b")
_DOTTED = re.compile(r"\b[A-Za-z_]\w*(?:\.[A-Za-z_]\w*){1,}")
_ERROR = re.compile(r"\b\w*(?:Error|Exception|Warning)\b")
_URL = re.compile(r"https?://")

SHAPE_NAMES: tuple[str, ...] = (
    "log_chars",
    "log_lines",
    "log_code_fences",
    "traceback",
    "log_file_paths",
    "log_dotted_names",
    "log_error_names",
    "code_line_share",
    "log_urls",
)


def tokens(text: str) -> list[str]:
    """Lower-cased words and identifiers (digits-only and one-letter words dropped)."""
    return _WORD.findall(text[:CHAR_LIMIT].lower())[:TOKEN_LIMIT]


def hashed(text: str, buckets: int, bigrams: bool = True) -> dict[int, float]:
    """The unit-length presence vector of the text's n-grams over `buckets` buckets."""
    words = tokens(text)
    grams = set(words)
    if bigrams:
        grams.update(f"{a} {b}" for a, b in itertools.pairwise(words))
    idx = {zlib.crc32(g.encode()) % buckets for g in grams}
    if not idx:
        return {}
    v = 1.0 / math.sqrt(len(idx))
    return dict.fromkeys(idx, v)


def shape(text: str) -> tuple[float, ...]:
    """Shape counts of the task text, in SHAPE_NAMES order (no words kept)."""
    text = text[:CHAR_LIMIT]
    lines = text.splitlines() or [text]
    code = sum(
        1
        for ln in lines
        if ln.startswith(("    ", "\t", ">>> ", "$ ")) or ln.rstrip().endswith((":", ")", ";"))
    )
    return (
        math.log1p(len(text)),
        math.log1p(len(lines)),
        math.log1p(text.count("```") // 2),
        1.0 if "Traceback (most recent call last)" in text else 0.0,
        math.log1p(len(_FILE.findall(text))),
        math.log1p(len(_DOTTED.findall(text))),
        math.log1p(len(_ERROR.findall(text))),
        code / len(lines),
        math.log1p(len(_URL.findall(text))),
    )


@dataclass(frozen=True, slots=True)
class TaskDifficulty:
    """A loaded artifact: standardised shape counts plus sparse hashed n-gram weights."""

    version: str
    buckets: int
    bigrams: bool
    mean: tuple[float, ...]
    scale: tuple[float, ...]
    shape_weights: tuple[float, ...]
    ngram_weights: dict[int, float]
    bias: float

    @classmethod
    def from_artifact(cls, doc: dict[str, Any]) -> TaskDifficulty:
        if tuple(doc["shape"]) != SHAPE_NAMES:
            raise ValueError(f"artifact {doc.get('version')} has other shape features")
        idx, w = doc["ngrams"]["index"], doc["ngrams"]["weights"]
        if len(idx) != len(w) or any(not 0 <= int(i) < int(doc["buckets"]) for i in idx):
            raise ValueError(f"artifact {doc.get('version')}: bad n-gram weights")
        return cls(
            version=str(doc["version"]),
            buckets=int(doc["buckets"]),
            bigrams=bool(doc["bigrams"]),
            mean=tuple(float(x) for x in doc["mean"]),
            scale=tuple(float(x) or 1.0 for x in doc["scale"]),
            shape_weights=tuple(float(x) for x in doc["shape_weights"]),
            ngram_weights={int(i): float(x) for i, x in zip(idx, w, strict=True)},
            bias=float(doc["bias"]),
        )

    def logit(self, text: str) -> float:
        z = self.bias
        for x, m, s, w in zip(shape(text), self.mean, self.scale, self.shape_weights, strict=True):
            z += w * (x - m) / s
        weights = self.ngram_weights
        if weights:  # a shape-only artifact skips the hashing
            for i, v in hashed(text, self.buckets, self.bigrams).items():
                z += weights.get(i, 0.0) * v
        return z

    def score(self, text: str) -> float:
        """0..1, higher for tasks that read like an hour or more of work."""
        z = self.logit(text)
        return 1.0 / (1.0 + math.exp(-max(min(z, 40.0), -40.0)))


@functools.cache
def load(name: str = ARTIFACT) -> TaskDifficulty:
    """A model artifact shipped in the package, by file name (read once)."""
    text = resources.files("tiergate.routing").joinpath("artifacts", name).read_text("utf-8")
    return TaskDifficulty.from_artifact(json.loads(text))


def task_difficulty(text: str) -> float:
    """The shipped model's score of a task text (0 for an empty one)."""
    return load(ARTIFACT).score(text) if text else 0.0
