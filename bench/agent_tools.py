"""A tool list shaped like Claude Code's, for benches that want an agent's real
tool payload (issue #30: every request of a coding agent resends it).

Claude Code sends about 17 tools and 55 KB of JSON schemas with each request. Its
schema text is Anthropic's and is not copied here: this list keeps the shape
that costs a gateway work (the tool names, each tool's properties, their
nesting: MultiEdit's and TodoWrite's arrays of objects, Grep's thirteen options,
enums) with descriptions of filler text of about the published lengths. Built at
import, in OpenAI chat-completions form (`type: function`), like the bench
bodies.
"""

from __future__ import annotations

from typing import Any

#: Filler of a property description's typical length.
_PROP = "p" * 300


def _prop(kind: str = "string", **extra: Any) -> dict[str, Any]:
    return {"type": kind, "description": _PROP, **extra}


def _object(props: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": props,
        "required": required,
        "additionalProperties": False,
    }


def _schema(props: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {**_object(props, required), "$schema": "http://json-schema.org/draft-07/schema#"}


_EDIT = _object(
    {"old_string": _prop(), "new_string": _prop(), "replace_all": _prop("boolean", default=False)},
    ["old_string", "new_string"],
)
_TODO = _object(
    {
        "content": {"type": "string", "minLength": 1},
        "status": {"type": "string", "enum": ["pending", "in_progress", "completed"]},
        "activeForm": {"type": "string", "minLength": 1},
    },
    ["content", "status", "activeForm"],
)
_GREP = {
    "pattern": _prop(),
    "path": _prop(),
    "glob": _prop(),
    "output_mode": _prop(enum=["content", "files_with_matches", "count"]),
    "-B": _prop("number"),
    "-A": _prop("number"),
    "-C": _prop("number"),
    "-n": _prop("boolean"),
    "-i": _prop("boolean"),
    "type": _prop(),
    "head_limit": _prop("number"),
    "multiline": _prop("boolean"),
}

#: (name, description length, properties, required)
_SPECS: list[tuple[str, int, dict[str, Any], list[str]]] = [
    (
        "Task",
        4000,
        {"description": _prop(), "prompt": _prop(), "subagent_type": _prop()},
        ["prompt"],
    ),
    (
        "Bash",
        9000,
        {
            "command": _prop(),
            "timeout": _prop("number"),
            "description": _prop(),
            "run_in_background": _prop("boolean"),
        },
        ["command"],
    ),
    ("Glob", 600, {"pattern": _prop(), "path": _prop()}, ["pattern"]),
    ("Grep", 1500, _GREP, ["pattern"]),
    ("ExitPlanMode", 1200, {"plan": _prop()}, ["plan"]),
    (
        "Read",
        2000,
        {"file_path": _prop(), "offset": _prop("number"), "limit": _prop("number")},
        ["file_path"],
    ),
    (
        "Edit",
        1200,
        {
            "file_path": _prop(),
            "old_string": _prop(),
            "new_string": _prop(),
            "replace_all": _prop("boolean", default=False),
        },
        ["file_path", "old_string", "new_string"],
    ),
    (
        "MultiEdit",
        2500,
        {"file_path": _prop(), "edits": _prop("array", items=_EDIT, minItems=1)},
        ["file_path", "edits"],
    ),
    ("Write", 700, {"file_path": _prop(), "content": _prop()}, ["file_path", "content"]),
    (
        "NotebookEdit",
        500,
        {
            "notebook_path": _prop(),
            "cell_id": _prop(),
            "new_source": _prop(),
            "cell_type": _prop(enum=["code", "markdown"]),
            "edit_mode": _prop(enum=["replace", "insert", "delete"]),
        },
        ["notebook_path", "new_source"],
    ),
    ("WebFetch", 1200, {"url": _prop(format="uri"), "prompt": _prop()}, ["url", "prompt"]),
    ("TodoWrite", 9000, {"todos": _prop("array", items=_TODO)}, ["todos"]),
    (
        "WebSearch",
        800,
        {
            "query": _prop(minLength=2),
            "allowed_domains": _prop("array", items={"type": "string"}),
            "blocked_domains": _prop("array", items={"type": "string"}),
        },
        ["query"],
    ),
    ("BashOutput", 400, {"bash_id": _prop(), "filter": _prop()}, ["bash_id"]),
    ("KillShell", 200, {"shell_id": _prop()}, ["shell_id"]),
    ("SlashCommand", 1500, {"command": _prop()}, ["command"]),
    ("ListMcpResources", 300, {"server": _prop()}, []),
]

CLAUDE_CODE_SHAPED: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": "d" * length,
            "parameters": _schema(props, required),
        },
    }
    for name, length, props, required in _SPECS
]
