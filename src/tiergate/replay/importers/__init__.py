"""`tiergate replay import`: agent logs in, replay-corpus sessions out.

One module per log format, each with `load(path) -> [Transcript]` and
`sniff(path, head) -> bool` (used by `--format auto`):

| format         | module            | what it reads                                        |
|----------------|-------------------|------------------------------------------------------|
| mini-swe-agent | `minisweagent`    | `<instance>.traj.json` (text and tool-call modes)    |
| swe-agent      | `sweagent`        | `<instance>.traj` (also multi-agent CodeR)           |
| openhands      | `openhands`       | `output.jsonl`, `<instance>.json`, or `events/` dir  |
| claude-code    | `claudecode`      | `~/.claude/projects/*/<session>.jsonl`               |
| codex          | `codex`           | `$CODEX_HOME/sessions/**/rollout-*.jsonl`            |
| opencode       | `opencode`        | `~/.local/share/opencode/opencode.db` (SQLite)       |
| autocoderover  | `autocoderover`   | a task folder's `conversation_round_0.json` (+ rest) |
| moatless       | `moatless`        | `<instance>/trajectory.json` (one stream per call)   |
| terminal-bench | `terminalbench`   | a trial's `sessions/agent.log` (mini-swe-agent)      |
| openai         | `openai_requests` | JSONL of chat-completions requests                   |

`transcript.session_doc` turns a transcript into turns; `labels` joins a
label per session. Nothing here is on the gateway's request path.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from tiergate.replay.importers import (
    autocoderover,
    claudecode,
    codex,
    minisweagent,
    moatless,
    openai_requests,
    opencode,
    openhands,
    sweagent,
    terminalbench,
)
from tiergate.replay.importers.labels import Labels
from tiergate.replay.importers.transcript import Transcript, session_doc

#: Format name -> module, in `--format auto` sniffing order (most specific first).
FORMATS: dict[str, ModuleType] = {
    "mini-swe-agent": minisweagent,
    "swe-agent": sweagent,
    "openhands": openhands,
    "claude-code": claudecode,
    "codex": codex,
    "opencode": opencode,
    "autocoderover": autocoderover,
    "moatless": moatless,
    "terminal-bench": terminalbench,
    "openai": openai_requests,
}
_HEAD_BYTES = 4096


class UnknownFormat(ValueError):
    """An input no importer can read."""


def _head(path: Path) -> bytes:
    if path.is_dir():
        return b""
    with open(path, "rb") as fh:
        return fh.read(_HEAD_BYTES)


def _session_folder(path: Path) -> bool:
    return path.is_dir() and (path / "events").is_dir()


def detect(path: Path) -> str | None:
    """The format name of a file or folder, by name and first bytes; None if unknown."""
    head = _head(path)
    for name, module in FORMATS.items():
        if module.sniff(path, head):
            return name
    return None


def _walk(root: Path) -> Iterator[Path]:
    """Files under root, and OpenHands session folders (not the event files inside)."""
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        if "events" in dirnames:
            dirnames.clear()
            yield here
            continue
        dirnames.sort()
        yield from (here / f for f in sorted(filenames))


def expand(paths: Iterable[str | Path], fmt: str = "auto") -> Iterator[tuple[Path, str]]:
    """(input, format) for every log under the given files and folders.

    A named file must be readable in the format; inside a folder, inputs that
    are not (READMEs, patches) are passed over.
    """
    for raw in paths:
        path = Path(raw)
        if path.is_dir() and not _session_folder(path):
            for child in _walk(path):
                found = detect(child) if fmt == "auto" else fmt
                if found is not None and FORMATS[found].sniff(child, _head(child)):
                    yield child, found
            continue
        found = detect(path) if fmt == "auto" else fmt
        if found is None:
            raise UnknownFormat(f"{path}: not a log format tiergate can import")
        yield path, found


@dataclass
class ImportStats:
    files: int = 0
    sessions: int = 0
    skipped_unlabelled: int = 0
    skipped_empty: int = 0
    failed: list[str] = field(default_factory=list)


def import_sessions(
    paths: Iterable[str | Path],
    fmt: str = "auto",
    labels: Labels | None = None,
    *,
    keep_unlabelled: bool = True,
    key_of: Callable[[Transcript], str | None] | None = None,
    stats: ImportStats | None = None,
    progress: Callable[[int], None] | None = None,
) -> Iterator[dict[str, Any]]:
    """Corpus sessions from agent logs, labelled where `labels` knows the session.

    `key_of` overrides the join key (a log that names no instance, matched by
    its task text, say). A file that fails to parse is recorded in `stats`
    and skipped: one truncated log should not lose a whole import.
    """
    stats = stats if stats is not None else ImportStats()
    seen: dict[str, int] = {}
    for path, name in expand(paths, fmt):
        stats.files += 1
        try:
            docs = list(_docs(path, name, labels, keep_unlabelled, key_of, stats))
        except (OSError, ValueError, KeyError, TypeError) as err:
            stats.failed.append(f"{path}: {err}")
            docs = []
        for doc in docs:
            n = seen.get(doc["session_id"], 0)
            seen[doc["session_id"]] = n + 1
            if n:
                doc["session_id"] = f"{doc['session_id']}#{n + 1}"
            stats.sessions += 1
            yield doc
        if progress is not None:
            progress(1)


def _docs(
    path: Path,
    name: str,
    labels: Labels | None,
    keep_unlabelled: bool,
    key_of: Callable[[Transcript], str | None] | None,
    stats: ImportStats,
) -> Iterator[dict[str, Any]]:
    if name == "openai":
        for doc in openai_requests.load_sessions(path):
            label = labels.get(doc["source"]["key"]) if labels else None
            if label is None and labels is not None and not keep_unlabelled:
                stats.skipped_unlabelled += 1
                continue
            if labels is not None and label is not None:
                doc.update(labels.fields(label))
                for t in doc["turns"]:
                    t["needs_strong"] = labels.is_hard(label)
            yield doc
        return
    for t in FORMATS[name].load(path):
        if key_of is not None:
            t.key = key_of(t) or t.key
        label = labels.get(t.key) if labels else None
        if label is None and labels is not None and not keep_unlabelled:
            stats.skipped_unlabelled += 1
            continue
        extra = labels.fields(label) if labels is not None and label is not None else {}
        made = session_doc(
            t,
            label=extra.get("label"),
            archetype=extra.get("archetype"),
            needs_strong=bool(labels and label is not None and labels.is_hard(label)),
        )
        if made is None:
            stats.skipped_empty += 1
            continue
        yield made
