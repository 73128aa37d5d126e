"""Which escalation decision buys counterfactual value? A leave-one-framework-out study
(issue #29, item 3).

    PYTHONPATH=src:. python -m eval.value_study --corpus-dir /work/cache/cfscore/corpus

The credit of a strong turn is linear (DESIGN.md, "Counterfactual escalation
value"): serving turn k of a session strong earns `(1 - r) p / n`, whatever k
is. So the best decision at every turn ranks turns by the *expected value per
strong turn*, `E[(1 - r) p / n | what the gateway has seen by turn k]`, and
serves strong above a threshold set by the strong-turn budget. This study fits
that expectation from the gateway's own per-turn features (the session scorer's
FEATURE_NAMES, computed by the planner exactly as at request time, plus the
turn index), on every framework but one, and scores the one left out against
the baseline ladder at the same strong-turn share.

Decisions compared on the held-out framework (each at its own threshold, the
percentile of its own scores that spends `--share` of its turns, as an online
percentile threshold would):
- `value-sticky`: escalate at the first turn scored over the threshold and stay
  strong to the end (share_cap_mode admit's semantics: never cut off);
- `value-per-turn`: strong on exactly the turns scored over it (may flap);
- `length`: the length rule (escalate at turn N), the ladder's own baseline;
- `random`: PGR = share.

`--extra-train contextgraph` also trains on an outcome-only corpus
(eval/realtraffic/contextgraph.py: 3,591 SWE-agent sessions, no p), which is never
scored against the ladder; `--split extra-only` trains on it alone, and
`--split extra-within` scores it on itself by instance folds (does more data of
one framework help?). Every row also gives the AUROC of each session's best
turn score for "the base agent failed": telling failures apart is not the same
as finding the cheap rescues.

Data: the outcome corpora of eval/realtraffic/outcomes.py (SWE-bench Lite runs
with Verified instances removed at build, Multi-SWE-bench Java, Terminal-Bench;
licences in docs/real-traffic.md). Held out from everything: SWE-bench Verified,
RouteLLM's and RouterArena's data (never read here). Nothing is shipped from this
study unless its left-out figures beat both baselines.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import orjson

from eval.session_scorer_data import Extracted, extract, stream_jsonl
from tiergate.replay.counterfactual import SessionValue, score

CORPORA = ("swebench-lite", "msb-java", "terminal-bench")
#: Outcome-only corpora (no p): trained on with `--extra-train`, never scored.
EXTRA_CORPORA = ("contextgraph",)


@dataclass
class Corpus:
    """Per-turn features and per-session outcome columns of the outcome corpora."""

    x: np.ndarray  # (turns, features)
    turn: np.ndarray  # (turns,) 1-based turn index within its session
    session: np.ndarray  # (turns,) session index
    r: np.ndarray  # (sessions,)
    p: np.ndarray  # (sessions,)
    n: np.ndarray  # (sessions,)
    framework: np.ndarray  # (sessions,) str
    corpus: np.ndarray  # (sessions,) str
    instance: np.ndarray  # (sessions,) str
    session_id: np.ndarray  # (sessions,) str


def outcome_columns(path: Path) -> tuple[list[float], list[float]]:
    r, p = [], []
    for doc in stream_jsonl(path):
        r.append(1.0 if doc.get("resolved") else 0.0)
        p.append(float(doc.get("strong_odds") or 0.0))
    return r, p


def load(corpus_dir: Path, cache: Path, extra: tuple[str, ...] = ()) -> Corpus:
    """The scored corpora, plus `extra` outcome-only ones; an extra corpus's p (it has
    none) is the scored sessions' mean p, so its value target ranks (1 - r) / n."""
    parts = []
    for name in (*CORPORA, *extra):
        path = corpus_dir / f"outcomes-{name}.jsonl"
        npz = cache / f"value-{name}.npz"
        if npz.exists():
            ex = Extracted.load(npz)
        else:
            print(f"extracting {path.name} ...", file=sys.stderr, flush=True)
            ex = extract(stream_jsonl(path), real=True)
            ex.save(npz)
        r, p = outcome_columns(path)
        parts.append((name, ex, r, p))
    xs, turns, sessions, cols = [], [], [], {k: [] for k in ("r", "p", "n", "fw", "c", "i", "s")}
    offset = 0
    for name, ex, r, p in parts:
        counts = np.bincount(ex.session, minlength=len(ex.session_id))
        first = np.concatenate([[0], np.cumsum(counts)[:-1]])
        turns.append(np.arange(len(ex.session)) - first[ex.session] + 1)
        xs.append(ex.x)
        sessions.append(ex.session + offset)
        offset += len(ex.session_id)
        cols["r"] += r
        cols["p"] += p
        cols["n"] += counts.tolist()
        cols["fw"] += ex.framework.tolist()
        cols["c"] += [name] * len(ex.session_id)
        cols["i"] += [f"{name}:{i}" for i in ex.instance]
        cols["s"] += ex.session_id.tolist()
    scored = np.isin(np.array(cols["c"]), CORPORA)
    p_all = np.array(cols["p"])
    p_all[~scored] = p_all[scored].mean()
    cols["p"] = p_all.tolist()
    return Corpus(
        x=np.vstack(xs),
        turn=np.concatenate(turns).astype(np.float64),
        session=np.concatenate(sessions),
        r=np.array(cols["r"]),
        p=np.array(cols["p"]),
        n=np.array(cols["n"], dtype=np.float64),
        framework=np.array(cols["fw"]),
        corpus=np.array(cols["c"]),
        instance=np.array(cols["i"]),
        session_id=np.array(cols["s"]),
    )


def design(c: Corpus) -> np.ndarray:
    """The inputs: the session scorer's features plus the turn index (log and linear)."""
    return np.column_stack([c.x, np.log1p(c.turn), c.turn / 50.0])


def fit_ridge(x: np.ndarray, y: np.ndarray, w: np.ndarray, l2: float) -> tuple[np.ndarray, ...]:
    """Weighted ridge regression on standardised inputs: (mean, scale, weights, bias)."""
    mu = np.average(x, axis=0, weights=w)
    sd = np.sqrt(np.average((x - mu) ** 2, axis=0, weights=w))
    sd[sd == 0] = 1.0
    z = (x - mu) / sd
    sw = np.sqrt(w)[:, None]
    a = np.column_stack([z, np.ones(len(z))]) * sw
    reg = l2 * np.eye(a.shape[1])
    reg[-1, -1] = 0.0
    beta = np.linalg.solve(a.T @ a + reg, a.T @ (y * sw[:, 0]))
    return mu, sd, beta[:-1], beta[-1:]


def predict(model: tuple[np.ndarray, ...], x: np.ndarray) -> np.ndarray:
    mu, sd, coef, bias = model
    return ((x - mu) / sd) @ coef + bias[0]


def sticky_strong(c: Corpus, keep: np.ndarray, over: np.ndarray) -> dict[int, tuple[int, int]]:
    """(strong turns, first strong turn) per session: strong from the first turn over."""
    out: dict[int, tuple[int, int]] = {}
    for t in np.flatnonzero(keep & over):
        s = int(c.session[t])
        k = int(c.turn[t])
        if s not in out or k < out[s][1]:
            out[s] = (int(c.n[s]) - k + 1, k)
    return out


def per_turn_strong(c: Corpus, keep: np.ndarray, over: np.ndarray) -> dict[int, tuple[int, int]]:
    out: dict[int, tuple[int, int]] = {}
    for t in np.flatnonzero(keep & over):
        s = int(c.session[t])
        k = int(c.turn[t])
        strong, first = out.get(s, (0, k))
        out[s] = (strong + 1, min(first, k))
    return out


def values(
    c: Corpus, sessions: np.ndarray, strong: dict[int, tuple[int, int]]
) -> list[SessionValue]:
    return [
        SessionValue(
            session_id=str(c.session_id[s]),
            instance=str(c.instance[s]),
            resolved=float(c.r[s]),
            odds=float(c.p[s]),
            turns=int(c.n[s]),
            strong=strong.get(int(s), (0, 0))[0],
            first_strong=strong[int(s)][1] if int(s) in strong else None,
        )
        for s in sessions
    ]


def threshold_for_share(
    c: Corpus, keep: np.ndarray, scores: np.ndarray, share: float, sticky: bool
) -> float:
    """The score threshold that spends `share` of the group's turns (bisection)."""
    total = float(c.n[np.unique(c.session[keep])].sum())
    lo, hi = float(scores[keep].min()) - 1e-9, float(scores[keep].max()) + 1e-9
    for _ in range(60):
        mid = (lo + hi) / 2
        over = scores > mid
        strong = (sticky_strong if sticky else per_turn_strong)(c, keep, over)
        spent = sum(v[0] for v in strong.values()) / total
        lo, hi = (mid, hi) if spent > share else (lo, mid)
    return hi


#: What the regression learns per turn (all per session, repeated on its turns).
TARGETS = {
    "value": "(1 - r) p / n: the credit of one strong turn (the decision's own objective)",
    "gain": "(1 - r) p: the credit of a whole rescue, ignoring its length",
    "odds": "p: the strong model's chance on the task",
    "losing": "1 - r: the base agent is failing",
}


def target(c: Corpus, name: str) -> np.ndarray:
    per_session = {
        "value": (1.0 - c.r) * c.p / c.n * c.n.mean(),  # scaled to order 1
        "gain": (1.0 - c.r) * c.p,
        "odds": c.p,
        "losing": 1.0 - c.r,
    }[name]
    return np.asarray(per_session[c.session])


def invariant_columns(
    c: Corpus, x: np.ndarray, y: np.ndarray, train_t: np.ndarray, floor: float
) -> np.ndarray:
    """Columns whose correlation with the target has the same sign, and at least
    `floor` in size, within every training framework taken alone: the features
    whose effect transfers between the frameworks seen, the others dropped."""
    signs = []
    for f in sorted(set(c.framework[c.session[train_t]].tolist())):
        rows = train_t & (c.framework[c.session] == f)
        xd, yd = x[rows] - x[rows].mean(axis=0), y[rows] - y[rows].mean()
        denom = np.sqrt((xd**2).sum(axis=0) * (yd**2).sum())
        corr = np.divide(xd.T @ yd, denom, out=np.zeros(x.shape[1]), where=denom > 0)
        signs.append(np.sign(corr) * (np.abs(corr) >= floor))
    stacked = np.array(signs)
    return (stacked != 0).all(axis=0) & (stacked == stacked[0]).all(axis=0)


def fit_and_score(
    c: Corpus,
    x: np.ndarray,
    y: np.ndarray,
    train_s: np.ndarray,
    l2: float,
    invariant: float | None = None,
    decide_by: int | None = None,
) -> np.ndarray:
    """Scores of every turn by a model fitted on the turns of sessions `train_s`,
    each training framework weighing the same in total, whatever its size.
    `invariant`: fit only the columns of `invariant_columns` at that floor.
    `decide_by`: fit only on turns up to that index (the turns decided on)."""
    train_t = train_s[c.session]
    if decide_by is not None:
        train_t = train_t & (c.turn <= decide_by)
    fw_turns = {
        f: float(train_t[c.framework[c.session] == f].sum()) for f in set(c.framework[train_s])
    }
    w = np.array([1.0 / fw_turns[c.framework[s]] for s in c.session[train_t]])
    cols = (
        np.ones(x.shape[1], dtype=bool)
        if invariant is None
        else invariant_columns(c, x, y, train_t, invariant)
    )
    if not cols.any():
        return np.zeros(len(x))
    return predict(fit_ridge(x[train_t][:, cols], y[train_t], w, l2), x[:, cols])


def held_out_scores(
    c: Corpus,
    x: np.ndarray,
    y: np.ndarray,
    held: str,
    l2: float,
    split: str,
    invariant: float | None = None,
    decide_by: int | None = None,
) -> np.ndarray:
    """Turn scores for framework `held`, by models that never saw its sessions' tasks.

    `lofo`: fitted on the other frameworks only. `within`: fitted on the held-out
    framework's own sessions of other tasks (five instance folds), as an operator
    whose gateway learns from its own agent's earlier outcomes (CI results) would;
    `lofo+within`: both."""
    if split == "lofo":
        return fit_and_score(c, x, y, c.framework != held, l2, invariant, decide_by)
    extra = ~np.isin(c.corpus, CORPORA)
    if split == "extra-only":
        return fit_and_score(c, x, y, extra, l2, invariant, decide_by)
    mine = extra if split == "extra-within" else c.framework == held
    rng = np.random.default_rng(0)
    folds = {i: int(rng.integers(5)) for i in sorted(set(c.instance[mine].tolist()))}
    fold = np.array([folds.get(i, -1) for i in c.instance])
    scores = np.zeros(len(c.session))
    for f in range(5):
        train_s = mine & (fold != f)
        if split == "lofo+within":
            train_s = train_s | ~mine
        part = (mine & (fold == f))[c.session]
        scores[part] = fit_and_score(c, x, y, train_s, l2, invariant, decide_by)[part]
    return scores


def run(
    c: Corpus,
    share: float,
    l2: float,
    target_name: str,
    split: str = "lofo",
    invariant: float | None = None,
    decide_by: int | None = None,
) -> list[dict[str, object]]:
    x = design(c)
    y = target(c, target_name)
    rows: list[dict[str, object]] = []
    within_extra = split == "extra-within"
    scored = ~np.isin(c.corpus, CORPORA) if within_extra else np.isin(c.corpus, CORPORA)
    for held in sorted(set(c.framework[scored].tolist())):
        scores = held_out_scores(c, x, y, held, l2, split, invariant, decide_by)
        if decide_by is not None:  # later turns never escalate
            scores = np.where(c.turn <= decide_by, scores, scores.min() - 1.0)
        for corpus_name in sorted(set(c.corpus[scored].tolist())):
            keep_s = (c.framework == held) & (c.corpus == corpus_name)
            if keep_s.sum() < 30:
                continue
            keep_t = keep_s[c.session]
            sessions = np.flatnonzero(keep_s)
            for name, sticky in (("value-sticky", True), ("value-per-turn", False)):
                thr = threshold_for_share(c, keep_t, scores, share, sticky)
                over = scores > thr
                strong = (sticky_strong if sticky else per_turn_strong)(c, keep_t, over)
                got = score(values(c, sessions, strong), resamples=400)
                auc = losing_auroc(c, sessions, keep_t, scores)
                rows.append(
                    {"framework": held, "corpus": corpus_name, "policy": name, "auroc": auc, **got}
                )
    return rows


def losing_auroc(c: Corpus, sessions: np.ndarray, keep_t: np.ndarray, scores: np.ndarray) -> float:
    """AUROC of each session's highest turn score for "the base agent failed" (r = 0):
    how well the scores tell losing sessions apart, whatever they cost to rescue."""
    best = np.full(len(c.session_id), -np.inf)
    np.maximum.at(best, c.session[keep_t], scores[keep_t])
    score_s, losing = best[sessions], c.r[sessions] == 0
    ranks = np.empty(len(score_s))
    ranks[np.argsort(score_s, kind="stable")] = np.arange(1, len(score_s) + 1)
    pos, neg = int(losing.sum()), int((~losing).sum())
    if not pos or not neg:
        return float("nan")
    return float((ranks[losing].sum() - pos * (pos + 1) / 2) / (pos * neg))


def fmt(v: object) -> str:
    return "-" if v is None else f"{v:.2f}" if isinstance(v, float) else str(v)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--corpus-dir", type=Path, required=True, help="outcome corpora folder")
    ap.add_argument("--cache", type=Path, default=Path("/tmp/tiergate-value"), help="npz cache")
    ap.add_argument("--share", type=float, default=0.15, help="strong-turn share to spend")
    ap.add_argument("--l2", type=float, default=10.0, help="ridge penalty")
    ap.add_argument("--target", choices=list(TARGETS), default="value", help="what is fitted")
    ap.add_argument(
        "--split",
        choices=["lofo", "within", "lofo+within", "extra-only", "extra-within"],
        default="lofo",
        help="lofo: fit on the other frameworks; within: on the held-out framework's\n"
        "other tasks (an operator's own outcomes); lofo+within: both;\n"
        "extra-only: on the --extra-train corpora alone (no scored framework seen);\n"
        "extra-within: the extra corpus scored on itself, five instance folds (its p is\n"
        "one constant, so PGR there ranks (1 - r) / n only)",
    )
    ap.add_argument(
        "--extra-train",
        action="append",
        default=[],
        choices=list(EXTRA_CORPORA),
        help="also train on this outcome-only corpus (eval/realtraffic/contextgraph.py)",
    )
    ap.add_argument(
        "--invariant",
        type=float,
        metavar="FLOOR",
        help="fit only the features whose correlation with the target has one sign,\n"
        "at least FLOOR in size, within every training framework alone",
    )
    ap.add_argument(
        "--decide-by",
        type=int,
        metavar="K",
        help="fit on, and escalate at, turns 1..K only (a strong turn is worth\n"
        "(1 - r) p / n, so an escalation late in a long session buys little)",
    )
    ap.add_argument("--json", type=Path, help="write the rows here")
    args = ap.parse_args(argv)
    args.cache.mkdir(parents=True, exist_ok=True)
    c = load(args.corpus_dir, args.cache, tuple(args.extra_train))
    rows = run(c, args.share, args.l2, args.target, args.split, args.invariant, args.decide_by)
    extra = f" + {', '.join(args.extra_train)}" if args.extra_train else ""
    print(f"target: {TARGETS[args.target]}; split {args.split}{extra}", end="; ")
    print(f"share {args.share:.0%}; l2 {args.l2:g}", end="")
    if args.invariant is not None:
        print(f"; invariant features, floor {args.invariant:g}", end="")
    print(f"; decided by turn {args.decide_by}\n" if args.decide_by else "\n")
    heads = ["framework (left out)", "corpus", "policy", "sessions", "share", "PGR (95 % CI)"]
    heads += ["random", "length", "oracle", "waste", "cut off", "PGR - max lower", "AUROC r=0"]
    print("| " + " | ".join(heads) + " |")
    print("|" + "---|" * len(heads))
    for r in rows:
        ci = r.get("interval") or {}
        lo = (ci.get("pgr") or [None, None])[0]
        gap = (ci.get("pgr_minus_length_rule") or [None])[0]
        rnd_gap = (ci.get("pgr_minus_random") or [None])[0]
        lower = None if gap is None or rnd_gap is None else min(gap, rnd_gap)
        cells = [
            r["framework"],
            r["corpus"],
            r["policy"],
            r["sessions"],
            f"{100 * float(r['strong_share']):.0f} %",
            f"{fmt(r['pgr'])} ({fmt(lo)}-{fmt((ci.get('pgr') or [None, None])[1])})",
            fmt(r["random"]),
            fmt(r["length_rule"]),
            fmt(r["oracle"]),
            fmt(r["waste"]),
            fmt(r["cut_off"]),
            fmt(lower),
            fmt(r["auroc"]),
        ]
        print("| " + " | ".join(str(x) for x in cells) + " |")
    if args.json:
        args.json.write_bytes(orjson.dumps(rows, option=orjson.OPT_SERIALIZE_NUMPY))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
