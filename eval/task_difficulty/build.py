"""Extract SWE-bench issue texts for the task-difficulty model into /tmp (never committed).

    PYTHONPATH=src:. python -m eval.task_difficulty.build \\
        --swebench-mirror /work/.mirror/SWE-bench+SWE-bench/repo \\
        --corpus-dir /tmp/rt/corpus-v2 --out /tmp/issuetext

Two kinds of text per labelled, non-Verified SWE-bench instance:

- `statements.jsonl`: {instance_id, repo, problem_statement, label, bucket} from
  the dataset parquets that SWE-bench/SWE-bench committed for a while
  (data/<split>/test.parquet, removed again in fbf17c15) at commit `COMMIT`.
  Only the Lite test parquet is in the fetched snapshot: the full test parquet
  is over the snapshot's 4 MiB file limit, so the 1,061 labelled non-Lite,
  non-Verified instances have no text here (docs/task-difficulty.md says what
  was searched). Reading parquet needs pyarrow (not a project dependency;
  put it on PYTHONPATH from a scratch venv).
- `views.jsonl`: {session_id, instance_id, bucket, framework, text}: the first
  user message of every session of the real-traffic corpus, as the gateway
  reads it (`parse_request`, first `user` message with words of its own,
  `task_message.task_of`, TASK_CHAR_LIMIT characters), i.e. the issue text
  inside each agent's own prompt wrapper.

SWE-bench Verified instances (`in_verified=true`) are dropped at the join, always.
Licences: SWE-bench is MIT; the problem statements are GitHub issue text of the
12 upstream repositories (their authors' words, under GitHub's terms), used
here as training data only and never committed.
"""

from __future__ import annotations

import argparse
import csv
import io
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson

from tiergate.formats.openai import parse_request
from tiergate.routing.task_message import task_of

LABELS = Path("/work/shared/data/swebench-difficulty/difficulty.csv")
COMMIT = "e05e7b3a28bffbf2d960c813078d403c3b5893ba"
"""SWE-bench/SWE-bench: 'Regenerate SWE-bench parquets with the django-10097 label fix'."""
PARQUETS = ("data/SWE-bench/test.parquet", "data/SWE-bench_Lite/test.parquet")
BUCKETS = {
    "<15 min fix": "easy",
    "15 min - 1 hour": "medium",
    "1-4 hours": "hard",
    ">4 hours": "hard",
}


def labels(path: Path = LABELS) -> dict[str, tuple[str, str]]:
    """instance -> (label, bucket), Verified instances dropped."""
    out: dict[str, tuple[str, str]] = {}
    with open(path, newline="") as fh:
        for row in csv.DictReader(fh):
            if row["in_verified"].strip().lower() == "true":
                continue
            out[row["instance_id"]] = (row["difficulty"], BUCKETS[row["difficulty"]])
    return out


def read_parquet_blob(mirror: Path, commit: str, path: str) -> list[dict[str, Any]] | None:
    """Rows of a parquet file at `commit`, or None when the snapshot lacks the blob."""
    got = subprocess.run(
        ["git", f"--git-dir={mirror}", "show", f"{commit}:{path}"],
        capture_output=True,
    )
    if got.returncode != 0:
        why = got.stderr.decode().strip()[:80]
        print(f"  {path}: not in the snapshot ({why})", file=sys.stderr)
        return None
    import pyarrow.parquet as pq  # only the builder needs it

    columns = ["instance_id", "repo", "problem_statement"]
    table = pq.read_table(io.BytesIO(got.stdout), columns=columns)
    return list(table.to_pylist())


def statements(mirror: Path, known: dict[str, tuple[str, str]]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for path in PARQUETS:
        for row in read_parquet_blob(mirror, COMMIT, path) or []:
            iid = str(row["instance_id"])
            if iid in known and iid not in out:
                label, bucket = known[iid]
                out[iid] = {
                    "instance_id": iid,
                    "repo": row["repo"],
                    "problem_statement": row["problem_statement"],
                    "label": label,
                    "bucket": bucket,
                    "source": f"SWE-bench/SWE-bench@{COMMIT[:8]}:{path}",
                }
    return out


def first_user_text(doc: dict[str, Any]) -> str:
    """The task text the gateway's transcript summary reads (routing/transcript.py):
    from the first request with a user message, harness blocks left out
    (routing.task_message), at most TASK_CHAR_LIMIT characters."""
    for turn in doc["turns"]:
        messages = parse_request(turn["request"]).messages
        if any(m.role == "user" for m in messages):
            return task_of(messages)
    return ""


def views(corpus_dir: Path, known: dict[str, tuple[str, str]]) -> list[dict[str, Any]]:
    out = []
    for protocol in ("text", "tool-call"):
        with open(corpus_dir / f"realtraffic-{protocol}.jsonl", "rb") as fh:
            for line in fh:
                if not line.strip():
                    continue
                doc = orjson.loads(line)
                source = doc.get("source") or {}
                iid = str(source.get("key") or doc["session_id"].split("/")[-1])
                if iid not in known:  # Verified or unlabelled: never read further
                    continue
                out.append(
                    {
                        "session_id": doc["session_id"],
                        "instance_id": iid,
                        "bucket": known[iid][1],
                        "framework": source.get("framework", ""),
                        "protocol": protocol,
                        "text": first_user_text(doc),
                    }
                )
    return out


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    with open(path, "wb") as fh:
        for row in rows:
            fh.write(orjson.dumps(row) + b"\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m eval.task_difficulty.build", description=__doc__)
    ap.add_argument("--swebench-mirror", type=Path, required=True)
    ap.add_argument("--corpus-dir", type=Path, required=True)
    ap.add_argument("--out", type=Path, default=Path("/tmp/issuetext"))
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    known = labels()
    st = statements(args.swebench_mirror, known)
    vw = views(args.corpus_dir, known)
    write_jsonl(args.out / "statements.jsonl", sorted(st.values(), key=lambda r: r["instance_id"]))
    write_jsonl(args.out / "views.jsonl", vw)
    by_bucket: dict[str, int] = {}
    for r in st.values():
        by_bucket[r["bucket"]] = by_bucket.get(r["bucket"], 0) + 1
    want: dict[str, int] = {}
    for _, b in known.values():
        want[b] = want.get(b, 0) + 1
    print(f"statements: {len(st)} of {len(known)} labelled non-Verified instances")
    print(f"  by bucket: {dict(sorted(by_bucket.items()))} of {dict(sorted(want.items()))}")
    print(f"views: {len(vw)} sessions, {len({v['instance_id'] for v in vw})} instances")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
