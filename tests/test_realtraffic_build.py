"""eval.realtraffic.build on a small real git repository: extraction at a pinned
commit, the label join with the held-out split dropped, and OpenHands sessions
matched to their instance by issue text."""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from eval.realtraffic.build import Source, build, named_instance

from tiergate.replay.importers.transcript import Transcript

TRACES = Path(__file__).parent / "data" / "traces"


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True
    ).stdout.strip()


@pytest.fixture
def repos(tmp_path: Path) -> Path:
    if shutil.which("git") is None:
        if os.environ.get("TIERGATE_REQUIRE_SERVICES") == "1":
            pytest.fail("git is not installed and TIERGATE_REQUIRE_SERVICES=1", pytrace=False)
        pytest.skip("git is not installed")
    repo = tmp_path / "repos" / "demo+runs"
    (repo / "trajs").mkdir(parents=True)
    for name in ("demo__parser-3.traj", "demo__fc-6.traj"):
        shutil.copy(TRACES / "swe-agent" / name, repo / "trajs" / name)
    # An OpenHands session of the same issue as demo__parser-3, naming no instance.
    session = repo / "sessions" / "a1b2" / "events"
    session.mkdir(parents=True)
    for f in (TRACES / "openhands" / "session-7f3a" / "events").glob("*.json"):
        event = json.loads(f.read_text())
        if event.get("source") == "user" and event.get("action") == "message":
            text = "<issue_description>\nParser hangs on empty input.\n</issue_description>"
            event["message"] = event["args"]["content"] = text
        (session / f.name).write_text(json.dumps(event))
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "runs")
    return tmp_path / "repos"


def test_build_joins_labels_holds_out_verified_and_matches_by_issue(
    repos: Path, tmp_path: Path
) -> None:
    commit = _git(repos / "demo+runs", "rev-parse", "HEAD")
    labels = tmp_path / "difficulty.csv"
    labels.write_text(
        "instance_id,difficulty,in_verified\n"
        "demo__parser-3,1-4 hours,false\n"
        "demo__fc-6,<15 min fix,true\n"
    )
    sources = (
        Source("text-run", "demo/runs", commit, "trajs", r"\.traj$", "swe-agent"),
        Source(
            "oh-run",
            "demo/runs",
            commit,
            "sessions",
            r"/events/\d+\.json$",
            "openhands",
            key="issue",
        ),
    )
    out = tmp_path / "out"
    summary = build(repos, out, labels, tmp_path / "work", sources)
    # demo__fc-6 is Verified: held out. The OpenHands session found its instance by text.
    assert summary == {"text/text-run/hard": 1, "tool-call/oh-run/hard": 1}
    rows = list(csv.DictReader((out / "manifest.csv").open()))
    assert {(r["source"], r["instance_id"], r["bucket"]) for r in rows} == {
        ("text-run", "demo__parser-3", "hard"),
        ("oh-run", "demo__parser-3", "hard"),
    }
    tool = [json.loads(x) for x in (out / "realtraffic-tool-call.jsonl").read_text().splitlines()]
    assert tool[0]["session_id"] == "oh-run/a1b2"
    assert tool[0]["source"]["dataset"] == f"demo/runs@{commit}"
    assert all(t["needs_strong"] for t in tool[0]["turns"])


def test_a_task_prompt_names_its_instance() -> None:
    t = Transcript("5d0c", "5d0c", "claude-code", "x.jsonl")
    prompt = "Fix this bug:\n  instance_id: django__django-12915\n  repo: x"
    t.add({"role": "user", "content": prompt})
    assert named_instance(t) == "django__django-12915"
    t2 = Transcript("5d0c", "5d0c", "claude-code", "x.jsonl")
    t2.add({"role": "user", "content": "The test test_retry is flaky, can you look?"})
    assert named_instance(t2) is None
