"""The learned session scorer: how hard a session looks from its behaviour so far.

The lexical delta score (routing.difficulty) reads the latest turn's words.
This scorer reads what the agent has *done*, from the session's running
transcript summary (routing.transcript, which folds each message once through
routing.progress and routing.observations): model calls, files edited, edit
churn, failure streaks, steps without progress, stuck evidence, exploration
breadth (distinct actions, steps before the first edit), recency (the recent
failure rate, steps since the last edit), reply and observation length, plus
shape statistics of the task text (length, lines, indented
share, character classes, identifier share, type/token ratio), none of which
is a hand-picked vocabulary, the latest turn's lexical delta score as one
more input (so a sudden hard turn still counts), and (v3) the learned
task-difficulty score of the task text (routing.task_difficulty, trained on
SWE-bench issue texts against human fix-time estimates).

The model is a logistic regression trained offline (eval/train_session_scorer.py)
and shipped as a versioned JSON artifact (artifacts/session_scorer_v2.json; v1
still loads): the names of the features it reads (a subset of FEATURE_NAMES),
standardisation, weights, and a bias placed so that the
operating point chosen on the training folds sits at the shipped delta
threshold (escalation.delta_t2, 0.55). The engine's difficulty trigger and the
percentile threshold then work unchanged on either score. The score the
engine reads is the model's, floored at the latest turn's lexical score
(`session_score`).

Request-time cost is a fixed ~30-term dot product over counters the summary
already keeps, plus the task-text statistics computed once per session when
the summary reads its task message (routing.task_message; the task-difficulty
score among them). Pure Python, no I/O after the artifacts are loaded (once, lazily).
"""

from __future__ import annotations

import functools
import json
import math
import operator
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING, Any, Protocol

from tiergate.routing.task_difficulty import task_difficulty
from tiergate.routing.task_message import TASK_CHAR_LIMIT

if TYPE_CHECKING:
    from tiergate.routing.difficulty import Tally
    from tiergate.routing.progress import Progress

ARTIFACT = "session_scorer_v2.json"
#: Earlier artifacts this code still loads (their features are a subset of FEATURE_NAMES).
EARLIER_ARTIFACTS = ("session_scorer_v1.json",)
#: Words of the task text read for the type/token ratio (bounds the per-session cost).
TASK_TOKEN_LIMIT = 4000
#: Pseudo-observations without a failure in the failed-observation share: a share
#: read from one or two observations is mostly noise (a session's first test run
#: fails on purpose), and a real struggle has many.
FAILURE_SHARE_PRIOR = 2
#: Contributions listed in the audit event.
REASONS_KEPT = 4
#: Compute the task-difficulty score even when the shipped artifact does not read it
#: (the offline trainers set this; the gateway then skips it: v2 does not read it).
COMPUTE_TASK_DIFFICULTY = False

FEATURE_NAMES: tuple[str, ...] = (
    # behaviour (routing.progress counts)
    "log_tool_calls",
    "log_files_edited",
    "log_edits",
    "edits_per_file",
    "edit_share",
    "log_exploration",
    "log_tools_used",
    "log_undo_redo",
    "stuck_evidence",
    "failure_share",
    "log_failure_streak",
    "log_longest_failure_streak",
    "log_steps_since_progress",
    "log_distinct_failures",
    # transcript size
    "log_transcript_tokens",
    "transcript_code_density",
    # task text shape (the first user message's own words: routing.task_message)
    "task_log_chars",
    "task_log_lines",
    "task_indented_share",
    "task_digit_share",
    "task_punct_share",
    "task_upper_share",
    "task_identifier_share",
    "task_type_token_ratio",
    # the latest turn's lexical delta score (routing.difficulty), as one input
    "lexical_delta",
    # v2: progress, recency, exploration breadth, verbosity
    "log_passes",
    "log_progress_events",
    "recent_failure_rate",
    "log_steps_before_first_edit",
    "log_steps_since_edit",
    "log_distinct_actions",
    "repeat_share",
    "log_mean_reply_chars",
    "log_mean_output_chars",
    # v3: the task-difficulty model's score of the task text (routing.task_difficulty)
    "task_difficulty",
)
"""Every feature this code computes, in `features` order; an artifact names the subset
it was trained on (v1: the first 25, v2: the first 34)."""


@dataclass(frozen=True, slots=True)
class TaskText:
    """Shape statistics of the task text and its task-difficulty score; no words are kept."""

    log_chars: float = 0.0
    log_lines: float = 0.0
    indented_share: float = 0.0
    digit_share: float = 0.0
    punct_share: float = 0.0
    upper_share: float = 0.0
    identifier_share: float = 0.0
    type_token_ratio: float = 0.0
    difficulty: float = 0.0  # routing.task_difficulty's score


def task_text(text: str) -> TaskText:
    """Statistics of a task description (bounded by TASK_CHAR_LIMIT / TASK_TOKEN_LIMIT),
    and its task-difficulty score (bounded likewise, routing.task_difficulty; 0 unless
    the shipped artifact reads it or COMPUTE_TASK_DIFFICULTY is set)."""
    text = text[:TASK_CHAR_LIMIT]
    if not text:
        return TaskText()
    lines = text.splitlines() or [text]
    indented = sum(1 for ln in lines if ln[:1] in (" ", "\t") and ln.strip())
    n = len(text)
    digits = sum(c.isdigit() for c in text)
    letters = sum(c.isalpha() for c in text)
    upper = sum(c.isupper() for c in text)
    punct = n - letters - digits - sum(c.isspace() for c in text)
    words = text.split()[:TASK_TOKEN_LIMIT]
    ident = sum(1 for w in words if "_" in w or "." in w.strip(".") or "(" in w)
    return TaskText(
        log_chars=math.log1p(n),
        log_lines=math.log1p(len(lines)),
        indented_share=indented / len(lines),
        digit_share=digits / n,
        punct_share=punct / n,
        upper_share=upper / max(letters, 1),
        identifier_share=ident / max(len(words), 1),
        type_token_ratio=len(set(words)) / max(len(words), 1),
        difficulty=task_difficulty(text) if _reads_task_difficulty() else 0.0,
    )


def _reads_task_difficulty() -> bool:
    return COMPUTE_TASK_DIFFICULTY or "task_difficulty" in shipped().names


class SessionSoFar(Protocol):
    """What `features` reads of a session's running summary (routing.transcript's
    TranscriptSummary, which imports this module: named here, not imported)."""

    @property
    def progress(self) -> Progress: ...

    @property
    def task(self) -> TaskText | None: ...

    @property
    def tally(self) -> Tally: ...


def features(summary: SessionSoFar, lexical_delta: float) -> tuple[float, ...]:
    """The feature vector of a session so far, in FEATURE_NAMES order; `lexical_delta`
    is the latest turn's delta score, which the planner computes anyway."""
    p = summary.progress
    task = summary.task or TaskText()
    files = len(p.files_edited)
    tally = summary.tally
    density = 100.0 * tally.code / max(tally.scanned, 200)
    return (
        math.log1p(p.tool_calls),
        math.log1p(files),
        math.log1p(p.edits),
        p.edits / max(files, 1),
        p.edits / max(p.tool_calls, 1),
        math.log1p(max(p.tool_calls - p.edits, 0)),
        math.log1p(len(p.tools_used)),
        math.log1p(p.cycles),
        float(len(p.stuck)),
        p.failed_observations / (p.observations + FAILURE_SHARE_PRIOR),
        math.log1p(p.failure_streak),
        math.log1p(p.longest_failure_streak),
        math.log1p(p.steps_since_progress),
        math.log1p(len(p.seen)),
        math.log1p(tally.tokens),
        density,
        task.log_chars,
        task.log_lines,
        task.indented_share,
        task.digit_share,
        task.punct_share,
        task.upper_share,
        task.identifier_share,
        task.type_token_ratio,
        lexical_delta,
        math.log1p(p.passes),
        math.log1p(p.progress_events),
        p.recent_failure,
        math.log1p(p.observations if p.first_edit_step is None else p.first_edit_step),
        math.log1p(p.observations - p.last_edit_step),
        math.log1p(len(p.actions)),
        1.0 - len(p.actions) / max(p.tool_calls, 1) if p.tool_calls else 0.0,
        math.log1p(p.reply_chars / max(p.replies, 1)),
        math.log1p(p.output_chars / max(p.observations, 1)),
        task.difficulty,
    )


@dataclass(frozen=True, slots=True)
class SessionScorer:
    """A loaded artifact: pick its features, standardise, dot product, logistic."""

    version: str
    names: tuple[str, ...]
    index: tuple[int, ...]  # positions of `names` in FEATURE_NAMES
    mean: tuple[float, ...]
    scale: tuple[float, ...]
    weights: tuple[float, ...]
    bias: float

    @classmethod
    def from_artifact(cls, doc: dict[str, Any]) -> SessionScorer:
        names = tuple(doc["features"])
        unknown = [n for n in names if n not in FEATURE_NAMES]
        if unknown or not names:
            raise ValueError(
                f"artifact {doc.get('version')} has other features than this code: {unknown}"
            )
        sizes = {len(doc[k]) for k in ("mean", "scale", "weights")}
        if sizes != {len(names)}:
            raise ValueError(f"artifact {doc.get('version')}: vectors do not match its features")
        return cls(
            version=str(doc["version"]),
            names=names,
            index=tuple(FEATURE_NAMES.index(n) for n in names),
            mean=tuple(float(x) for x in doc["mean"]),
            scale=tuple(float(x) or 1.0 for x in doc["scale"]),
            weights=tuple(float(x) for x in doc["weights"]),
            bias=float(doc["bias"]),
        )

    def contributions(self, x: tuple[float, ...]) -> list[float]:
        """Per artifact feature, its share of the logit; `x` is a full `features` vector."""
        return [
            w * (x[i] - m) / s
            for w, i, m, s in zip(self.weights, self.index, self.mean, self.scale, strict=True)
        ]

    def score(self, x: tuple[float, ...]) -> float:
        return self.probability(self.contributions(x))

    def probability(self, contributions: list[float]) -> float:
        """The score from `contributions(x)` (so `explain` computes them once)."""
        z = self.bias + sum(contributions)
        return 1.0 / (1.0 + math.exp(-max(min(z, 40.0), -40.0)))

    def reasons(self, x: tuple[float, ...], kept: int = REASONS_KEPT) -> dict[str, float]:
        """The largest contributions to the logit (feature name -> value), for audit."""
        return self.top_reasons(self.contributions(x), kept)

    def top_reasons(self, contributions: list[float], kept: int = REASONS_KEPT) -> dict[str, float]:
        """`reasons` from `contributions(x)`; ties keep the artifact's order."""
        parts = sorted(
            zip(self.names, contributions, strict=True), key=operator.itemgetter(1), reverse=True
        )
        return {name: round(c, 3) for name, c in parts[:kept] if c > 0}


@functools.cache
def load(name: str = ARTIFACT) -> SessionScorer:
    """A scorer artifact shipped in the package, by file name (read once)."""
    text = resources.files("tiergate.routing").joinpath("artifacts", name).read_text("utf-8")
    return SessionScorer.from_artifact(json.loads(text))


def shipped() -> SessionScorer:
    """The scorer of the current artifact (ARTIFACT)."""
    return load(ARTIFACT)


def session_score(
    summary: SessionSoFar, lexical_delta: float, scorer: SessionScorer | None = None
) -> float:
    """The score `escalation.scorer: learned` feeds the engine (0..1, trigger at
    delta_t2): the shipped model's (or `scorer`'s: the trainer checks a candidate
    with it), floored at the latest turn's lexical score. The floor keeps a routine
    session that turns hard in one turn (whose cumulative features barely move)
    escalating as it does under the lexical scorer."""
    model = scorer or shipped()
    return max(model.score(features(summary, lexical_delta)), lexical_delta)


def explain(summary: SessionSoFar, lexical_delta: float) -> tuple[float, dict[str, float]]:
    """`session_score` and its reasons for the audit event: the model's top
    contributions, or `lexical_floor` when the lexical score is the higher."""
    scorer = shipped()
    parts = scorer.contributions(features(summary, lexical_delta))
    learned = scorer.probability(parts)
    if lexical_delta > learned:
        return lexical_delta, {"lexical_floor": round(lexical_delta, 3)}
    return learned, scorer.top_reasons(parts)
