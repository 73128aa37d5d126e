"""Can the task text predict p, the strong model's odds? A leave-one-framework-out study
(issue #29, the first "next" of docs/real-traffic.md).

    PYTHONPATH=src:. python -m eval.text_odds_study --corpus-dir /work/cache/cfscore/corpus

eval/value_ceiling.py shows that knowing p exactly at turn 1 is worth PGR 0.22-0.36
at a 15 % share on the SWE-bench Lite and Terminal-Bench frameworks (random: 0.15).
This asks how much of that a model of p from the task text recovers. Features are
the request-time task-difficulty features (tiergate.routing.task_difficulty:
hashed word unigrams and bigrams, the nine shape counts) of each session's first
user message, as the gateway reads it. Model: weighted ridge regression on p, each
instance weighing the same.

Split: for each framework left out, its instances are cut into five folds; fold f
is scored by a model fitted on the *other* frameworks' sessions of instances
outside fold f (so neither the framework nor the task was seen: three Lite
frameworks share most of their tasks). Every grid point is reported; none is
picked on the held-out framework. SWE-bench Verified is absent from the corpora,
RouteLLM's and RouterArena's data are never read.

Reported per framework: AUROC of the score for p >= 0.5 and for (1 - r) p >= 0.3
(the sessions worth rescuing), and PGR when the highest-scored sessions are
escalated at turn 1 up to 15 % and 20 % of the turns (eval/value_ceiling.py's
policy), with the instance-clustered 95 % interval.

`--replies N --target gain` reads the agent's own first N replies instead (what
the base model made of the task: its plan, its first commands), fits (1 - r) p,
and escalates at turn N + 1.
"""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from eval.session_scorer_data import stream_jsonl
from eval.task_difficulty.build import first_user_text
from eval.value_ceiling import escalate_from_turn_one
from tiergate.replay.counterfactual import SessionValue, score
from tiergate.routing.task_difficulty import hashed, shape

CORPORA = ("swebench-lite", "msb-java", "terminal-bench")
GRID = [(mode, l2) for mode in ("shape", "ngrams", "both") for l2 in (0.3, 3.0)]


def replies_text(doc: dict[str, Any], turns: int) -> str:
    """The agent's own first `turns` replies (text and tool calls), as the gateway
    sees them come back."""
    out = []
    for turn in doc["turns"][:turns]:
        reply = turn.get("response") or {}
        content = reply.get("content") or ""
        if isinstance(content, list):
            content = " ".join(str(b.get("text", "")) for b in content if isinstance(b, dict))
        out.append(str(content))
        for call in reply.get("tool_calls") or []:
            fn = call.get("function") or call
            out.append(f"{fn.get('name', '')} {str(fn.get('arguments', ''))[:500]}")
    return "\n".join(out)


def load(corpus_dir: Path, replies: int = 0) -> tuple[list[SessionValue], list[str], list[str]]:
    """Sessions (r, p, n), their framework group and their text: the task, or with
    `replies` > 0 the agent's first that many replies."""
    values, groups, texts = [], [], []
    for name in CORPORA:
        for doc in stream_jsonl(corpus_dir / f"outcomes-{name}.jsonl"):
            source = doc.get("source") or {}
            key = str(source.get("key") or doc["session_id"].split("/")[-1])
            framework = str(source.get("framework", ""))
            values.append(
                SessionValue(
                    session_id=doc["session_id"],
                    instance=f"{name}:{key}",
                    resolved=1.0 if doc.get("resolved") else 0.0,
                    odds=float(doc.get("strong_odds") or 0.0),
                    turns=max(1, len(doc["turns"])),
                )
            )
            groups.append(framework if name in framework else f"{framework} ({name})")
            texts.append(replies_text(doc, replies) if replies else first_user_text(doc))
    return values, groups, texts


def features(texts: list[str], buckets: int = 2048) -> dict[str, np.ndarray]:
    s = np.array([shape(t) for t in texts])
    s = (s - s.mean(0)) / (s.std(0) + 1e-9)
    g = np.zeros((len(texts), buckets))
    for row, text in enumerate(texts):
        for i, v in hashed(text, buckets, True).items():
            g[row, i] = v
    return {"shape": s, "ngrams": g, "both": np.hstack([g, s])}


def ridge_predict(
    x: np.ndarray, y: np.ndarray, w: np.ndarray, l2: float, x_new: np.ndarray
) -> np.ndarray:
    """Weighted ridge regression in its dual form (more columns than rows)."""
    mu = np.average(x, axis=0, weights=w)
    ym = float(np.average(y, weights=w))
    sw = np.sqrt(w)
    xc = (x - mu) * sw[:, None]
    alpha = np.linalg.solve(xc @ xc.T + l2 * np.eye(len(xc)), (y - ym) * sw)
    return np.asarray((x_new - mu) @ (xc.T @ alpha) + ym)


def out_of_sample(
    values: list[SessionValue],
    groups: np.ndarray,
    x: np.ndarray,
    l2: float,
    held: str,
    y: np.ndarray,
) -> np.ndarray:
    """Scores of the held-out group's sessions, each by a model that saw neither its
    framework nor its task."""
    inst = np.array([v.instance for v in values])
    test = np.flatnonzero(groups == held)
    rng = np.random.default_rng(0)
    fold = {i: int(rng.integers(5)) for i in sorted(set(inst[test]))}
    out = np.zeros(len(test))
    for f in range(5):
        part = np.array([k for k, j in enumerate(test) if fold[inst[j]] == f])
        if not len(part):
            continue
        unseen = set(inst[test[part]])
        train = np.array(
            [j for j in range(len(values)) if groups[j] != held and inst[j] not in unseen]
        )
        per = Counter(inst[train])
        w = np.array([1.0 / per[inst[j]] for j in train])
        out[part] = ridge_predict(x[train], y[train], w, l2, x[test[part]])
    return out


def auroc(score_: np.ndarray, positive: np.ndarray) -> float:
    order = np.argsort(score_, kind="mergesort")
    ranks = np.empty(len(score_))
    ranks[order] = np.arange(1, len(score_) + 1)
    n1 = int(positive.sum())
    n0 = len(positive) - n1
    if not n1 or not n0:
        return float("nan")
    return float((ranks[positive].sum() - n1 * (n1 + 1) / 2) / (n1 * n0))


#: What the regression fits, per session.
TARGETS = {"odds": "p", "gain": "(1 - r) p"}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--corpus-dir", type=Path, required=True, help="outcome corpora folder")
    ap.add_argument("--resamples", type=int, default=400, help="bootstrap resamples")
    ap.add_argument(
        "--replies",
        type=int,
        default=0,
        help="read the agent's first N replies instead of the task text, and\n"
        "escalate at turn N + 1 (0: the task text, at turn 1)",
    )
    ap.add_argument("--target", choices=list(TARGETS), default="odds", help="what is fitted")
    args = ap.parse_args(argv)
    values, group_list, texts = load(args.corpus_dir, args.replies)
    groups = np.array(group_list)
    designs = features(texts)
    y_all = np.array(
        [v.odds if args.target == "odds" else (1 - v.resolved) * v.odds for v in values]
    )
    turn = args.replies + 1
    view = f"first {args.replies} replies" if args.replies else "task"
    print(f"text: {view}; ", end="")
    print(f"fitted: {TARGETS[args.target]}; escalation at turn {turn}\n")
    heads = ["framework (left out)", "features / l2", "AUROC p>=0.5", "AUROC (1-r)p>=0.3"]
    heads += ["PGR at 15 % (95 % CI)", "PGR at 20 % (95 % CI)"]
    print("| " + " | ".join(heads) + " |")
    print("|" + "---|" * len(heads))
    for held in sorted(set(group_list)):
        idx = np.flatnonzero(groups == held)
        held_values = [values[j] for j in idx]
        p = np.array([v.odds for v in held_values])
        gain = np.array([(1 - v.resolved) * v.odds for v in held_values])
        for mode, l2 in GRID:
            s = out_of_sample(values, groups, designs[mode], l2, held, y_all)
            by_score = dict(zip(held_values, s.tolist(), strict=True))
            cells = [held, f"{mode} / {l2:g}", f"{auroc(s, p >= 0.5):.2f}"]
            cells.append(f"{auroc(s, gain >= 0.3):.2f}")
            for share in (0.15, 0.20):
                chosen = escalate_from_turn_one(held_values, by_score.__getitem__, share, turn)
                got = score(chosen, resamples=args.resamples)
                lo, hi = (got.get("interval") or {}).get("pgr") or (float("nan"), float("nan"))
                cells.append(f"{got['pgr']:.2f} ({lo:.2f}-{hi:.2f}), random {got['random']:.2f}")
            print("| " + " | ".join(cells) + " |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
