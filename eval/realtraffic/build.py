"""Build the real-traffic development corpus from public agent trajectories.

Public runs on SWE-bench Lite, pinned by repository and commit (see
docs/real-traffic.md for licences and counts):

- coder (text protocol): NL2Code/CodeR @ d6346834, trajs/*.traj (SWE-agent
  format, multi-agent);
- mini-deepseek (tool-call): SWE-agent/mini-swe-agent @ 3c7d1d7f (a commit of
  pull request #816), output/deepseek_bench1/*.traj.json (the same files were
  committed again as output/deepseek_chat_test_1-100 in ec0e8e84: one run);
- openhands-glm (tool-call): ergt10/openhands_swebench @ 3f8ba937,
  .eval_sessions/sessions/*/events/*.json;
- sweagent-gpt4-1..3 (text): three runs of SWE-agent 0.x with GPT-4, kept in
  nus-apr/auto-code-rover @ 3536ac29, results/swe-agent-results/cost_2_*/*.traj;
- acr-* (text): five AutoCodeRover 1.0 runs (GPT-4, three without and two with
  patch validation), same repository, results/acr-*/*/<instance>_<time>/;
- moatless-sonnet (tool-call): Moatless Tools 0.0.4 with Claude 3.5 Sonnet
  (20241022), aorwall/moatless-tools @ 91f87418,
  evaluations/20241117_moatless_claude_3_5_sonnet_20241022/*/trajectory.json
  (exact logged requests, one per call);
- claude-code-scb (tool-call): Claude Code (claude-sonnet-4-5) sessions of
  jiayuanz3/SWEContextBench @ 31bb0415, "cases/SWEContextBench Lite Past
  Experience/*.jsonl".

Each session is joined to the human fix-time label of its SWE-bench instance
(/work/shared/data/swebench-difficulty/difficulty.csv). SWE-bench Verified
instances (`in_verified=true`) are HELD OUT and are dropped at the join,
before any trajectory is read into the corpus. Buckets: `<15 min fix` ->
easy, `15 min - 1 hour` -> medium, `1-4 hours` and `>4 hours` -> hard; every
turn of a hard session is `needs_strong` (session-level ground truth).

OpenHands' session folders do not name their instance: a session is matched
to its instance by its issue text, indexed from the trajectories that do name
theirs (by file name) of the same SWE-bench Lite split. Claude Code session
files are named by session id: their first message names the instance
(`instance_id: ...`).

    python -m eval.realtraffic.build --repos DIR --out DIR [--only NAME ...]

`--repos` holds a git clone (or bare mirror) of each repository, named
`owner+name`, `owner+name/repo` (the fetch tool's mirrors) or `name`. Output:
one corpus per protocol, `realtraffic-text.jsonl` and
`realtraffic-tool-call.jsonl`, `manifest.csv` (session, source, instance,
label, bucket, turns; no content) and `summary.json`.
"""

from __future__ import annotations

import argparse
import csv
import re
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from tqdm import tqdm

from tiergate.replay.corpus import write_corpus
from tiergate.replay.importers import ImportStats, import_sessions
from tiergate.replay.importers.labels import Labels, load_labels
from tiergate.replay.importers.transcript import Transcript

DEFAULT_LABELS = Path("/work/shared/data/swebench-difficulty/difficulty.csv")
BUCKETS = {
    "<15 min fix": "easy",
    "15 min - 1 hour": "medium",
    "1-4 hours": "hard",
    ">4 hours": "hard",
}
HARD = ("hard",)


@dataclass(frozen=True)
class Source:
    name: str
    repo: str
    commit: str
    prefix: str
    """Folder in the commit whose files are the trajectories."""
    pattern: str
    """Regex a trajectory's path must match (relative to the repository)."""
    fmt: str
    key: str = "file"
    """How a session finds its instance: `file` (the importer's key, from the
    file name), `issue` (matched by issue text) or `prompt` (named in the first
    user message as `instance_id: ...`)."""


ACR_REPO = "nus-apr/auto-code-rover"
ACR_COMMIT = "3536ac292e3062ffb3f6e98457958e2b803228d6"
ACR_FILES = (
    r"/[^/]+_\d{4}-\d\d-\d\d_\d\d-\d\d-\d\d/"
    r"(conversation_round_\d+|debug_agent_write_patch_\d+|cost)\.json$"
)

SOURCES = (
    Source(
        "coder",
        "NL2Code/CodeR",
        "d63468344bc215bbabb8f0c1ba4af24897a946df",
        "trajs",
        r"\.traj$",
        "swe-agent",
    ),
    Source(
        "mini-deepseek",
        "SWE-agent/mini-swe-agent",
        "3c7d1d7f8fb8630b187744215f67470b6755f60c",
        "output/deepseek_bench1",
        r"\.traj\.json$",
        "mini-swe-agent",
    ),
    Source(
        "openhands-glm",
        "ergt10/openhands_swebench",
        "3f8ba937f9e13afa16e8596c497becbe6a52154c",
        ".eval_sessions/sessions",
        r"/events/\d+\.json$",
        "openhands",
        key="issue",
    ),
    *(
        Source(
            f"sweagent-gpt4-{run}",
            ACR_REPO,
            ACR_COMMIT,
            f"results/swe-agent-results/cost_2_{run}",
            r"\.traj$",
            "swe-agent",
        )
        for run in (1, 2, 3)
    ),
    *(
        Source(
            f"acr-{run}",
            ACR_REPO,
            ACR_COMMIT,
            f"results/acr-{run}",
            ACR_FILES,
            "autocoderover",
        )
        for run in ("run-1", "run-2", "run-3", "val-only", "val-sbfl")
    ),
    Source(
        "moatless-sonnet",
        "aorwall/moatless-tools",
        "91f874186e8298e5270c00a334c7a962bb4cdfad",
        "evaluations/20241117_moatless_claude_3_5_sonnet_20241022",
        r"/trajectory\.json$",
        "moatless",
    ),
    Source(
        "claude-code-scb",
        "jiayuanz3/SWEContextBench",
        "31bb04155f52b184bf31b220e3cff0607ac9c953",
        "cases/SWEContextBench Lite Past Experience",
        r"\.jsonl$",
        "claude-code",
        key="prompt",
    ),
)


def git_dir(repos: Path, repo: str) -> Path:
    owner, name = repo.split("/")
    for candidate in (repos / f"{owner}+{name}" / "repo", repos / f"{owner}+{name}", repos / name):
        if candidate.exists():
            return candidate
    raise SystemExit(f"{repo}: no clone under {repos} (tried {owner}+{name} and {name})")


def _git(gd: Path, *args: str) -> bytes:
    return subprocess.run(["git", "-C", str(gd), *args], check=True, capture_output=True).stdout


def list_files(gd: Path, commit: str, prefix: str) -> list[str]:
    """Paths under `prefix` at `commit`."""
    names = _git(gd, "ls-tree", "-r", "-z", "--name-only", commit, "--", prefix)
    return [p for p in names.decode().split("\0") if p]


def blobs(gd: Path, commit: str, paths: list[str]) -> Iterator[tuple[str, bytes]]:
    """(path, content) of each file at `commit`, streamed through one `git cat-file
    --batch`; files the snapshot lacks (large files are left out of it) are skipped."""
    proc = subprocess.Popen(
        ["git", "-C", str(gd), "cat-file", "--batch"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        for p in paths:
            proc.stdin.write(f"{commit}:{p}\n".encode())
            proc.stdin.flush()
            header = proc.stdout.readline().split()
            if len(header) < 3 or header[1] != b"blob":
                continue
            data = proc.stdout.read(int(header[2]))
            proc.stdout.read(1)
            yield p, data
    finally:
        proc.stdin.close()
        proc.wait()


def checkout(src: Source, repos: Path, into: Path) -> tuple[Path, int]:
    """Write the source's trajectories under `into`; returns their root and count."""
    gd = git_dir(repos, src.repo)
    paths = [p for p in list_files(gd, src.commit, src.prefix) if re.search(src.pattern, p)]
    written = 0
    bar = tqdm(total=len(paths), desc=f"extract {src.name}", unit="file", file=sys.stderr)
    for p, data in blobs(gd, src.commit, paths):
        target = into / src.name / p
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        written += 1
        bar.update()
    bar.close()
    return into / src.name / src.prefix, written


_SPACE = re.compile(r"\s+")
_ISSUE_ENDS = ("</issue_description>", "</pr_description>")
_ISSUE_MARKERS = ("ISSUE:\n", "Consider the following PR description:\n", "<issue_description>\n")


def issue_key(text: str) -> str | None:
    """The first 80 characters of an issue text, whitespace collapsed: a join key."""
    for marker in _ISSUE_MARKERS:
        i = text.find(marker)
        if i >= 0:
            issue = text[i + len(marker) :]
            for end in _ISSUE_ENDS:
                issue = issue.split(end, 1)[0]
            return _SPACE.sub(" ", issue).strip()[:80]
    return None


def first_user_text(t: Transcript) -> str:
    return next((str(m["content"]) for _, m in t.messages if m["role"] == "user"), "")


_NAMED = re.compile(r"instance_id:\s*([A-Za-z0-9_.-]+__[A-Za-z0-9_.-]+-\d+)")


def named_instance(t: Transcript) -> str | None:
    """The SWE-bench instance a task prompt names (`instance_id: owner__repo-123`)."""
    m = _NAMED.search(first_user_text(t))
    return m.group(1) if m else None


def issue_index(roots: list[Path]) -> dict[str, str]:
    """Issue key -> instance id, from trajectories that name their instance."""
    from tiergate.replay.importers import FORMATS, expand

    index: dict[str, str] = {}
    for root in roots:
        for path, fmt in expand([root]):
            for t in FORMATS[fmt].load(path):
                key = issue_key(first_user_text(t))
                if key:
                    index.setdefault(key, t.key)
    return index


def build(
    repos: Path,
    out: Path,
    labels_path: Path,
    work: Path,
    sources: tuple[Source, ...] = SOURCES,
) -> dict[str, Any]:
    labels: Labels = load_labels(
        labels_path,
        "instance_id",
        "difficulty",
        hard=HARD,
        buckets=BUCKETS,
        include={"in_verified": "false"},  # Verified is held out
    )
    roots: dict[str, Path] = {}
    for src in sources:
        roots[src.name], n = checkout(src, repos, work)
        print(f"{src.name}: {n} files from {src.repo}@{src.commit[:8]}", file=sys.stderr)
    index = issue_index([roots[s.name] for s in sources if s.key == "file"])

    def by_issue(t: Transcript) -> str | None:
        key = issue_key(first_user_text(t))
        return index.get(key) if key else None

    key_of = {"file": None, "issue": by_issue, "prompt": named_instance}

    out.mkdir(parents=True, exist_ok=True)
    files = {p: open(out / f"realtraffic-{p}.jsonl", "wb") for p in ("text", "tool-call")}  # noqa: SIM115
    manifest: list[dict[str, Any]] = []
    counts: Counter[tuple[str, str, str]] = Counter()
    try:
        for src in sources:
            stats = ImportStats()
            bar = tqdm(desc=f"import {src.name}", unit="file", file=sys.stderr)
            docs = import_sessions(
                [roots[src.name]],
                src.fmt,
                labels,
                keep_unlabelled=False,
                key_of=key_of[src.key],
                stats=stats,
                progress=bar.update,
            )
            for doc in docs:
                doc["session_id"] = f"{src.name}/{doc['session_id']}"
                doc["source"]["file"] = doc["source"]["file"].split(f"{src.name}/", 1)[-1]
                doc["source"]["dataset"] = f"{src.repo}@{src.commit}"
                protocol = doc["source"]["protocol"]
                write_corpus([doc], files[protocol])
                counts[(protocol, src.name, doc["archetype"])] += 1
                manifest.append(
                    {
                        "session_id": doc["session_id"],
                        "source": src.name,
                        "protocol": protocol,
                        "instance_id": doc["source"]["key"],
                        "label": doc["label"],
                        "bucket": doc["archetype"],
                        "turns": len(doc["turns"]),
                    }
                )
            bar.close()
            print(
                f"{src.name}: {stats.sessions} labelled sessions, "
                f"{stats.skipped_unlabelled} left out (Verified or unlabelled or unmatched), "
                f"{len(stats.failed)} unreadable",
                file=sys.stderr,
            )
    finally:
        for fh in files.values():
            fh.close()
    with open(out / "manifest.csv", "w", newline="", encoding="utf-8") as mf:
        writer = csv.DictWriter(mf, fieldnames=list(manifest[0]) if manifest else ["session_id"])
        writer.writeheader()
        writer.writerows(manifest)
    summary = {f"{p}/{s}/{b}": n for (p, s, b), n in sorted(counts.items())}
    (out / "summary.json").write_bytes(orjson.dumps(summary, option=orjson.OPT_INDENT_2))
    return summary


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m eval.realtraffic.build",
        description="Build the real-traffic replay corpus (SWE-bench Lite agent trajectories "
        "labelled with human fix-time estimates; SWE-bench Verified held out).",
    )
    p.add_argument("--repos", type=Path, required=True, help="folder of the source git clones")
    p.add_argument("--out", type=Path, default=Path("realtraffic"), help="output folder")
    p.add_argument("--labels", type=Path, default=DEFAULT_LABELS, help="difficulty.csv")
    p.add_argument("--work", type=Path, help="where to extract trajectories (default: temp)")
    p.add_argument(
        "--only",
        nargs="+",
        metavar="NAME",
        choices=[s.name for s in SOURCES],
        help="build from these sources only (default: all)",
    )
    args = p.parse_args(argv)
    sources = tuple(s for s in SOURCES if not args.only or s.name in args.only)
    if args.work:
        summary = build(args.repos, args.out, args.labels, args.work, sources)
    else:
        with tempfile.TemporaryDirectory(prefix="realtraffic-") as tmp:
            summary = build(args.repos, args.out, args.labels, Path(tmp), sources)
    for key, n in summary.items():
        print(f"{key}: {n}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
