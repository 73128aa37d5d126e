"""Terminal-Bench trials: an installed agent's console, `<trial>/sessions/agent.log`.

Terminal-Bench (laude-institute/terminal-bench-leaderboard) records each
trial as a folder `<task>.<k>-of-<m>.<run>/` with `results.json`
(`task_id`, `is_resolved`), `commands.txt` (the keystrokes the harness sent
to tmux) and `sessions/agent.log`, the raw terminal output of the agent it
installed and ran. Only an agent that prints its conversation can be rebuilt
from that: mini-swe-agent does (its console shows `System:`, `User:` and
`mini-swe-agent (step N, $cost):` blocks, one per model call, the shell
command in a bash block and the output back as a user message: the text
protocol). A console that shows no conversation (OpenHands, Droid, the
orchestrator runs) is reported, not guessed.

Fidelity: terminal escape codes, the "Waiting for the LM to respond"
spinner, rich's rule lines and LiteLLM's logging tracebacks (stderr, never
sent to the model) are removed; rich wraps long lines at the terminal width,
so a message's line breaks can differ from what was sent. No times.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import orjson

from tiergate.replay.importers.transcript import Transcript

FRAMEWORK = "mini-swe-agent (terminal-bench)"
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07]*\x07|\x1b[()][0-9A-B]|\x1b[=>]")
_SPINNER = re.compile(r"[\u2800-\u28ff] Waiting for the LM to respond\.\.\.")
_STEP = re.compile(r"^mini-swe-agent \(step (\d+), \$[0-9.]+\):\s*$")
_RULE = re.compile(r"^\u2500{8,}.*$")
_LITELLM = re.compile(r"^\d\d:\d\d:\d\d - LiteLLM:")
_HEADERS = {"System:": "system", "User:": "user"}
_MODEL = re.compile(r"\bmini -m (\S+)")


def sniff(path: Path, head: bytes) -> bool:
    return (
        path.name == "agent.log"
        and path.parent.name == "sessions"
        and (path.parent.parent / "results.json").is_file()
    )


def results(path: Path) -> dict[str, Any]:
    """The trial's `results.json` (next to `sessions/`)."""
    doc = orjson.loads((path.parent.parent / "results.json").read_bytes())
    return doc if isinstance(doc, dict) else {}


def console_lines(raw: str) -> list[str]:
    """The console as plain lines: escapes, spinner, rules and LiteLLM noise removed."""
    text = _SPINNER.sub("", _ANSI.sub("", raw)).replace("\r\n", "\n")
    lines = []
    skipping = 0
    for line in text.split("\n"):
        line = line.replace("\r", "")
        if skipping:
            skipping -= 1
            if line.startswith("ImportError: Missing dependency"):
                skipping = 0
            continue
        if _LITELLM.match(line):
            skipping = 60  # its traceback, up to the ImportError line that ends it
            continue
        if _RULE.match(line):
            continue
        lines.append(line)
    return lines


def messages(lines: list[str]) -> list[dict[str, str]]:
    """The conversation: a message starts at each header line and runs to the next."""
    out: list[dict[str, str]] = []
    role: str | None = None
    body: list[str] = []

    def close() -> None:
        if role is not None:
            out.append({"role": role, "content": "\n".join(body).strip("\n")})

    for line in lines:
        header = _HEADERS.get(line.strip()) if line.strip() in _HEADERS else None
        if header is None and _STEP.match(line.strip()):
            header = "assistant"
        if header is not None:
            close()
            role, body = header, []
            continue
        if line.startswith("Saved trajectory to "):
            break
        if role is not None:
            body.append(line)
    close()
    while out and out[-1]["role"] == "user" and not out[-1]["content"].strip():
        out.pop()  # the agent exited after its last call: nothing was sent
    return out


def load(path: Path) -> list[Transcript]:
    res = results(path)
    raw = path.read_bytes().decode("utf-8", "replace")
    msgs = messages(console_lines(raw))
    if not any(m["role"] == "assistant" for m in msgs):
        raise ValueError(f"{path}: the console shows no model call (only mini-swe-agent's does)")
    trial = path.parent.parent.name
    task = str(res.get("task_id") or trial.split(".", 1)[0])
    model = _MODEL.search(raw)
    t = Transcript(
        str(res.get("trial_name") or trial),
        task,
        FRAMEWORK,
        str(path),
        model=model.group(1).strip("'\"") if model else None,
    )
    for m in msgs:
        t.add(m)
    return [t]
