"""The soak test (bench/soak.py) as a test, for CI's short run:

    TIERGATE_SOAK_SECONDS=120 .venv/bin/pytest tests/test_soak.py      # make soak-short

Skipped unless TIERGATE_SOAK_SECONDS is set, so the normal suite stays fast. Runs the
documented command as a subprocess (its own processes, loopback only) and checks the
targets it reports, and that the traffic really was the promised mix, in all three
client wire formats (Chat Completions, Anthropic Messages, Responses).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SECONDS = os.environ.get("TIERGATE_SOAK_SECONDS", "")

pytestmark = pytest.mark.skipif(
    not SECONDS,
    reason="soak test: set TIERGATE_SOAK_SECONDS (e.g. 120, as `make soak-short` does)",
)


def _timeout() -> float:
    return float(SECONDS or 0) + 300  # start-up, in-flight requests, flush, clean-up


@pytest.mark.timeout(_timeout())
def test_soak_two_instances_on_redis_and_postgres(
    redis_url: str, postgres_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    seconds = float(SECONDS)
    assert seconds >= 30, "TIERGATE_SOAK_SECONDS must be at least 30"
    out = tmp_path / "soak.json"
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "soak.py"),
            "--minutes",
            f"{seconds / 60:g}",
            "--redis-url",
            redis_url,
            "--postgres-url",
            postgres_url,
            "--out",
            str(out),
            "--no-progress",
        ],
        capture_output=True,
        text=True,
        timeout=_timeout() - 10,
    )
    with capsys.disabled():
        print("\n" + proc.stdout)
    assert out.exists(), proc.stderr[-3000:]
    report = json.loads(out.read_text())
    assert report["errors"]["non_injected"] == {}
    rows = report["usage_rows"]
    assert rows["rows"] == rows["served"] > 0 and rows["missing"] == rows["unexpected"] == 0
    assert all(g["flat"] for g in report["rss"]["gateways"]), report["rss"]
    assert report["verdict"]["ok"], report["verdict"]
    assert proc.returncode == 0, proc.stderr[-3000:]

    # the mix really happened: streams, tools, lanes, every escalation trigger, faults
    requests = report["requests"]
    kinds = requests["by_kind"]
    assert requests["achieved_rate"] >= 0.9 * report["options"]["rate"]
    assert requests["streamed"] > 0.2 * requests["sent"]
    assert min(requests["by_instance"].values()) > 0.4 * requests["sent"]
    for kind in ("coding:tool_result", "coding:hard", "coding:fail", "lane:switch", "direct:text"):
        assert kinds.get(kind, 0) > 0, kind
    tiers = requests["tier_headers"]
    for reason in ("explicit", "difficulty", "strikes"):
        assert tiers.get(f"strong; reason={reason}", 0) > 0, tiers
    assert report["errors"]["faults_fired_upstream"] > 0
    # every client wire format, streamed and not, with tool turns (bench/soak_wire.py)
    wires = requests["by_wire"]
    assert set(wires) == {"chat", "anthropic", "responses"}, wires
    for wire, seen in wires.items():
        assert seen["streamed"] > 0 and seen["sent"] > seen["streamed"], wire
        assert seen["tool_result"] > 0 and seen["errors"] == 0, wire
