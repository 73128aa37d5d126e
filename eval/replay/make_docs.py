"""Regenerate docs/replay.md and docs/figures/replay-*.png from the default corpus.

A thin runner over `tiergate replay report` (the harness lives in tiergate.replay,
so the installed `tiergate` command has it too). The metrics JSON goes next to
this script's output directory instead of into docs/.

Run: .venv/bin/python eval/replay/make_docs.py
"""

from __future__ import annotations

import sys
from pathlib import Path

from tiergate.cli import main

ROOT = Path(__file__).resolve().parents[2]

if __name__ == "__main__":
    metrics = ROOT / "eval" / "out" / "replay-metrics.json"
    metrics.parent.mkdir(parents=True, exist_ok=True)
    sys.exit(
        main(
            [
                "replay",
                "report",
                "--out",
                str(ROOT / "docs"),
                "--metrics",
                str(metrics),
                *sys.argv[1:],
            ]
        )
    )
