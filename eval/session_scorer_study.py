"""What separates hard from easy real sessions, feature by feature (issue #15 study).

    PYTHONPATH=src:. python -m eval.session_scorer_study --cache-dir /tmp/session-scorer-cache

Reads the trainer's feature caches of the real development corpus (build them
with `python -m eval.train_session_scorer --corpus-dir ...` first) and prints,
per protocol, each session-scorer feature's AUC for hard against easy
sessions (0.5: no separation; below 0.5: lower on hard sessions), measured at
the session's last turn and at its 10th turn (what the engine could know
early), plus how often the strike producers fire twice in a session per
bucket. Single-feature AUCs on 17 hard sessions have wide error bars (about
+-0.15 at 95 %): read them as "which way, roughly", not as a ranking.
Never reads the held-out independent corpus.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from eval.session_scorer_data import Extracted
from eval.session_scorer_model import strike_fired
from tiergate.routing.session_scorer import FEATURE_NAMES

EARLY_TURN = 10


def auc(pos: np.ndarray, neg: np.ndarray) -> float:
    """P(a hard session's value > an easy one's), ties counting half."""
    if not len(pos) or not len(neg):
        return float("nan")
    greater = (pos[:, None] > neg[None, :]).sum()
    ties = (pos[:, None] == neg[None, :]).sum()
    return float((greater + 0.5 * ties) / (len(pos) * len(neg)))


def session_rows(d: Extracted) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per session: the row of its last turn, of its EARLY_TURN-th turn, its length."""
    n = len(d.session_id)
    first = np.full(n, np.iinfo(np.int64).max)
    last = np.zeros(n, dtype=np.int64)
    np.minimum.at(first, d.session, np.arange(len(d.session)))
    np.maximum.at(last, d.session, np.arange(len(d.session)))
    return last, np.minimum(first + EARLY_TURN - 1, last), last - first + 1


def study(d: Extracted, protocol: str) -> list[str]:
    last, early, length = session_rows(d)
    hard, easy = d.bucket == "hard", d.bucket == "easy"
    rows = []
    for j, name in enumerate(FEATURE_NAMES):
        end_x, early_x = d.x[last, j], d.x[early, j]
        rows.append((name, auc(end_x[hard], end_x[easy]), auc(early_x[hard], early_x[easy])))
    n_turns = np.log1p(length.astype(float))
    rows.append(("(session length, turns)", auc(n_turns[hard], n_turns[easy]), float("nan")))
    rows.sort(key=lambda r: -abs(r[1] - 0.5))
    struck = strike_fired(d)
    lines = [
        f"### {protocol}: {int(hard.sum())} hard, {int(easy.sum())} easy sessions",
        "",
        "strike trigger (two struck turns within 30): "
        + ", ".join(
            f"{b} {int(struck[d.bucket == b].sum())}/{int((d.bucket == b).sum())}"
            for b in ("easy", "medium", "hard")
        ),
        "",
        f"| feature | AUC hard vs easy, last turn | AUC at turn {EARLY_TURN} |",
        "|---|---:|---:|",
    ]
    lines += [f"| {n} | {a:.2f} | {'-' if np.isnan(b) else f'{b:.2f}'} |" for n, a, b in rows]
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m eval.session_scorer_study", description=__doc__)
    ap.add_argument("--cache-dir", type=Path, default=Path("/tmp/session-scorer-cache"))
    args = ap.parse_args(argv)
    for protocol in ("text", "tool-call"):
        d = Extracted.load(args.cache_dir / f"real-{protocol}.npz")
        print("\n".join(study(d, protocol)) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
