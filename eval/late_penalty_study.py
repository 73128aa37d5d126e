"""Would a stricter difficulty threshold late in a session separate real hard sessions better?

On real tool-call traffic the learned score's easy escalations come late (median
first strong turn 25 against 10 for hard sessions, docs/real-traffic.md): its
cumulative features (transcript tokens, distinct failures) grow with any long
session. This study subtracts `k * max(0, ln(turn / t0))` from the model part of
the fold-out score (the lexical floor is kept, so synthetic latent-hard sessions
are not touched) and applies the difficulty trigger alone (two consecutive turns
at or above 0.55; no strikes, no caps), per protocol and bucket.

It reads the trainer's fold-out scores and its feature cache (for the lexical
floor); it writes nothing. The penalty was not shipped (docs/session-scorer.md,
"A late-session penalty, studied and not shipped"): its parameters would be picked
on the very fold-out scores it is judged on.

    PYTHONPATH=src:. python -m eval.late_penalty_study --foldout /tmp/foldout.json \
        --cache-dir /tmp/sweep/cache --corpus-dir /tmp/rt/corpus-v2
"""

from __future__ import annotations

import argparse
import csv
import json
import math
from collections.abc import Sequence
from pathlib import Path

from eval.session_scorer_data import Extracted

THRESHOLD = 0.55
STREAK = 2
GRID: tuple[tuple[float, float], ...] = (
    (0.0, 1.0),
    (0.05, 5.0),
    (0.05, 10.0),
    (0.1, 5.0),
    (0.1, 10.0),
    (0.15, 10.0),
    (0.2, 10.0),
)


def first_fire(scores: Sequence[float], floor: Sequence[float], k: float, t0: float) -> int | None:
    """The 1-based turn the difficulty trigger fires on, with the late penalty; None if never."""
    streak = 0
    for i, (s, lex) in enumerate(zip(scores, floor, strict=True)):
        penalty = k * max(0.0, math.log((i + 1) / t0))
        value = max(s - penalty, lex) if s > lex else lex  # the model part pays, not the floor
        streak = streak + 1 if value >= THRESHOLD else 0
        if streak >= STREAK:
            return i + 1
    return None


def main(argv: Sequence[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--foldout", type=Path, required=True, help="trainer --foldout-scores output")
    p.add_argument("--cache-dir", type=Path, required=True, help="trainer --cache-dir")
    p.add_argument("--corpus-dir", type=Path, required=True, help="eval.realtraffic.build output")
    args = p.parse_args(argv)
    scores: dict[str, list[float]] = json.loads(args.foldout.read_text())
    with (args.corpus_dir / "manifest.csv").open() as fh:
        manifest = {r["session_id"]: r for r in csv.DictReader(fh)}
    floor: dict[str, list[float]] = {}
    for protocol in ("text", "tool-call"):
        e = Extracted.load(args.cache_dir / f"real-{protocol}.npz")
        for s, sid in enumerate(e.session_id):
            floor[str(sid)] = e.delta[e.session == s].tolist()
    for protocol in ("text", "tool-call"):
        print(protocol)
        for k, t0 in GRID:
            cells = []
            for bucket in ("easy", "medium", "hard"):
                ids = [
                    sid
                    for sid, r in manifest.items()
                    if r["protocol"] == protocol and r["bucket"] == bucket and sid in scores
                ]
                n = sum(first_fire(scores[i], floor[i], k, t0) is not None for i in ids)
                cells.append(f"{bucket} {n}/{len(ids)} ({n / max(len(ids), 1):.0%})")
            print(f"  k={k:<5} t0={t0:<5}", "  ".join(cells))


if __name__ == "__main__":
    main()
