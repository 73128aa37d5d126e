"""Request shapes Claude Code 2.1.x sends to `POST /v1/messages?beta=true`.

Built from the public Anthropic API reference and from what Claude Code was
seen to send through a recording endpoint: the beta list in `anthropic-beta`,
the session id in `X-Claude-Code-Session-Id` and inside the JSON string
`metadata.user_id`, a `system` message inside `messages`, adaptive thinking,
`context_management`, `output_config`, cache breakpoints on the system blocks
and the last user block.
"""

from __future__ import annotations

import json
from typing import Any

SESSION = "3f0b3c9e-5a6d-4d0b-9b8a-2f4c1e7d9a10"
USER_ID = json.dumps({"device_id": "ab" * 32, "account_uuid": "", "session_id": SESSION})
BETAS = [
    "claude-code-20250219",
    "oauth-2025-04-20",
    "interleaved-thinking-2025-05-14",
    "context-management-2025-06-27",
    "prompt-caching-scope-2026-01-05",
    "mid-conversation-system-2026-04-07",
    "effort-2025-11-24",
]
HEADERS = {
    "anthropic-version": "2023-06-01",
    "anthropic-beta": ",".join(BETAS),
    "x-claude-code-session-id": SESSION,
    "x-app": "cli",
    "user-agent": "claude-cli/2.1.234 (external, cli)",
    "x-stainless-timeout": "600",
}
EPHEMERAL = {"type": "ephemeral"}
MID_SYSTEM = "The user switched to plan mode: propose changes, do not edit files."

SYSTEM = [
    {"type": "text", "text": "x-anthropic-billing-header: cc_version=2.1.234; cc_entrypoint=cli"},
    {
        "type": "text",
        "text": "You are Claude Code, Anthropic's official CLI for Claude.",
        "cache_control": EPHEMERAL,
    },
    {
        "type": "text",
        "text": "You are an interactive CLI tool that helps users with software engineering "
        "tasks. Use the instructions below and the tools available to you to assist the user.",
        "cache_control": EPHEMERAL,
    },
]
TOOLS = [
    {
        "name": "Bash",
        "description": "Executes a given bash command and returns its output.",
        "input_schema": {
            "$schema": "http://json-schema.org/draft-07/schema#",
            "type": "object",
            "properties": {
                "command": {"type": "string", "description": "The command to execute"},
                "timeout": {"type": "number", "description": "Optional timeout in ms"},
            },
            "required": ["command"],
            "additionalProperties": False,
        },
    },
    {
        "name": "Read",
        "description": "Reads a file from the local filesystem.",
        "input_schema": {
            "type": "object",
            "properties": {"file_path": {"type": "string"}},
            "required": ["file_path"],
            "additionalProperties": False,
        },
    },
]
REMINDER = (
    "<system-reminder>\nAs you answer the user's questions, you can use the following "
    "context:\n# currentDate\nToday's date is 2026-12-01.\n</system-reminder>"
)


def _common(model: str, stream: bool) -> dict[str, Any]:
    return {
        "model": model,
        "max_tokens": 32000,
        "stream": stream,
        "system": SYSTEM,
        "tools": TOOLS,
        "metadata": {"user_id": USER_ID},
        "thinking": {"type": "adaptive"},
        "context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]},
        "output_config": {"effort": "high"},
    }


def first_turn(model: str, stream: bool) -> dict[str, Any]:
    """`claude -p "Say hello"`: one user turn, then a mid-conversation system message."""
    return {
        **_common(model, stream),
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": REMINDER},
                    {"type": "text", "text": "Say hello", "cache_control": EPHEMERAL},
                ],
            },
            {"role": "system", "content": MID_SYSTEM},
        ],
    }


def tool_turn(model: str, stream: bool) -> dict[str, Any]:
    """A later turn: history with thinking, a tool call and its result; a system
    message that is cleared once the next user message exists; a server tool; a
    document block; a newer top-level field."""
    return {
        **_common(model, stream),
        "tools": [*TOOLS, {"type": "web_search_20250305", "name": "web_search", "max_uses": 3}],
        "speed": "standard",
        "messages": [
            {"role": "user", "content": "What is in this repository?"},
            {
                "role": "system",
                "content": [{"type": "text", "text": "Reply in one line."}],
                "clear_at": "next_user_message",
            },
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "List the files.", "signature": "sig-1"},
                    {"type": "redacted_thinking", "data": "ZW5jcnlwdGVk"},
                    {"type": "text", "text": "Let me look."},
                    {
                        "type": "tool_use",
                        "id": "toolu_01",
                        "name": "Bash",
                        "input": {"command": "ls"},
                    },
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_01", "content": "README.md\nsrc"},
                    {
                        "type": "document",
                        "source": {"type": "text", "media_type": "text/plain", "data": "notes"},
                    },
                    {"type": "text", "text": "Now summarise", "cache_control": EPHEMERAL},
                ],
            },
            {"role": "system", "content": MID_SYSTEM},
        ],
    }
