"""Recapture the agent-CLI fixtures: run the live agent tests once, rebuild the files.

    PYTHONPATH=src:. python -m eval.agent_cli_sessions.recapture [--agents-dir DIR]

Runs tests/test_agents_*.py (about two minutes; the real CLIs, installed by
`make agents` under .agents/ or at --agents-dir) with capture_plugin.py loaded
and TIERGATE_REQUIRE_SERVICES=1 (a missing CLI fails instead of skipping),
writes the raw captures to a fresh folder under /tmp, then runs build.py,
which refuses to write unless every test was captured and the fixtures
reproduce the live engine. Recapture after a CLI upgrade, a change of the
simulator's scripts or of the agent tests, or a change of what the engine's
inputs read (a new feature, codec or strike producer): the check's test
(tests/test_agent_cli_check.py) says when the live values no longer match.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from eval.agent_cli_sessions.build import build

ROOT = Path(__file__).resolve().parents[2]


def capture(raw_dir: Path, agents_dir: Path | None) -> None:
    env = {
        **os.environ,
        "TIERGATE_CAPTURE_DIR": str(raw_dir),
        "TIERGATE_REQUIRE_SERVICES": "1",
        "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT), str(ROOT / "tests")]),
    }
    if agents_dir is not None:
        env["TIERGATE_AGENTS_DIR"] = str(agents_dir)
    tests = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tests").glob("test_agents_*.py"))
    argv = [sys.executable, "-m", "pytest", "-q", "-o", "addopts=", "-p", "no:cacheprovider"]
    argv += ["-p", "eval.agent_cli_sessions.capture_plugin", *tests]
    subprocess.run(argv, cwd=ROOT, env=env, check=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m eval.agent_cli_sessions.recapture", description=__doc__
    )
    ap.add_argument("--agents-dir", type=Path, help="installed CLIs (default: .agents/)")
    ap.add_argument("--raw", type=Path, help="keep the raw captures here (default: a temp dir)")
    args = ap.parse_args(argv)
    raw = args.raw or Path(tempfile.mkdtemp(prefix="agent-cli-capture-"))
    raw.mkdir(parents=True, exist_ok=True)
    if any(raw.glob("*.jsonl")):
        raise SystemExit(f"{raw} already holds captures; give an empty folder")
    capture(raw, args.agents_dir)
    print(build(raw))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
