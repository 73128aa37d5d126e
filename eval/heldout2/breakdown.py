"""Per-shape breakdown of one replay of the heldout2 corpus (the same runs as the CLI).

    python -m eval.heldout2.breakdown eval/out/heldout2/heldout2-text.jsonl [--json OUT]

`tiergate replay --json` reports per archetype (easy/medium/hard); this groups the
same per-session outcomes by the corpus's `label.kind` shape (easy, medium, hard
latent / explicit / steady) and reports, for hard sessions, the first strong turn
relative to the labelled `hard_from_turn`. It runs the shipped policies through the
replay pipeline exactly as `tiergate replay` does; it neither tunes nor chooses.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
from collections import defaultdict
from typing import Any

from tiergate.replay import experiments as ex
from tiergate.replay.corpus import load_corpus
from tiergate.replay.costmodel import CostModel
from tiergate.replay.harness import memory_store
from tiergate.replay.metrics import outcomes
from tiergate.replay.pipeline import prepare

POLICIES = (
    "escalation",
    "escalation-uncapped",
    "escalation-learned",
    "escalation-learned-uncapped",
    "escalation-lexical",
    "escalation-lexical-uncapped",
)


def shape(label: dict[str, Any]) -> str:
    bucket = str(label["bucket"])
    return bucket if bucket != "hard" else f"hard-{str(label['kind']).split(':')[0]}"


async def breakdown(path: str) -> dict[str, Any]:
    corpus = load_corpus(path)
    prep = prepare(corpus, path)
    rp = ex.Replayer(prep.facts, CostModel(), memory_store)
    out: dict[str, Any] = {}
    for policy in ex.policy_list(list(POLICIES)):
        rows = outcomes(await rp.run(policy))
        groups: dict[str, list[tuple[Any, dict[str, Any]]]] = defaultdict(list)
        for o, doc in zip(rows, corpus, strict=True):
            groups[shape(doc["label"])].append((o, doc["label"]))
        per: dict[str, Any] = {}
        for g, items in sorted(groups.items()):
            esc = [(o, lab) for o, lab in items if o.escalated]
            lags = [
                o.first_strong_turn - lab["hard_from_turn"]
                for o, lab in esc
                if lab.get("hard_from_turn") and o.first_strong_turn is not None
            ]
            per[g] = {
                "sessions": len(items),
                "escalated": len(esc),
                "first_strong_turn_median": statistics.median([o.first_strong_turn for o, _ in esc])
                if esc
                else None,
                "turns_after_hard_from_median": statistics.median(lags) if lags else None,
                "triggers": dict(
                    sorted(
                        {
                            t: sum(o.trigger == t for o, _ in esc)
                            for t in {o.trigger for o, _ in esc}
                        }.items(),
                        key=lambda kv: str(kv[0]),
                    )
                ),
            }
        out[policy.name] = per
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("corpus")
    ap.add_argument("--json", help="write the breakdown here")
    args = ap.parse_args(argv)
    doc = asyncio.run(breakdown(args.corpus))
    for name, per in doc.items():
        cells = [
            f"{g} {v['escalated']}/{v['sessions']}"
            + (f" (med first {v['first_strong_turn_median']})" if v["escalated"] else "")
            for g, v in per.items()
        ]
        print(f"{name:28s} " + "; ".join(cells))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(doc, fh, indent=1, sort_keys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
